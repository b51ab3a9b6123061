//! Matrix specifications: Kubernetes version ranges and lists ([`parse_versions`]),
//! controller lists ([`parse_controllers`]) and the matrix file (`ci/matrix.yaml`).

use serde::{Deserialize, Serialize};
use std::path::Path;

use crate::controller::ControllerRef;
use crate::toolchain::KubeVersion;
use crate::toolchain::versions::Version;

/// Errors of matrix specifications.
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// A Kubernetes range or list that names no supported version.
    #[error("parse Kubernetes versions `{given}`: {detail}")]
    Versions {
        /// Input.
        given: String,
        /// Why.
        detail: String,
    },
    /// A controller list that does not parse.
    #[error("parse controllers `{given}`: {detail}")]
    Controllers {
        /// Input.
        given: String,
        /// Why.
        detail: String,
    },
    /// The matrix file is unreadable.
    #[error("read the matrix file {path}: {detail}")]
    File {
        /// Path.
        path: String,
        /// Why.
        detail: String,
    },
}

/// Expands `1.29..1.37` (every supported version in the inclusive range) or `1.29,1.32`.
pub fn parse_versions(spec: &str) -> Result<Vec<KubeVersion>, MatrixError> {
    let err = |detail: String| MatrixError::Versions {
        given: spec.into(),
        detail,
    };
    let mut out = vec![];
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((lo, hi)) = part.split_once("..") {
            let minor = |s: &str| {
                s.parse::<Version>()
                    .ok()
                    .filter(|v| v.parts() >= 2)
                    .map(|v| v.major_minor())
            };
            let (Some(lo), Some(hi)) = (minor(lo), minor(hi)) else {
                return Err(err(format!("`{part}` is not a range like 1.27..1.37")));
            };
            let inside: Vec<KubeVersion> = KubeVersion::supported()
                .into_iter()
                .filter(|v| (lo..=hi).contains(&(u64::from(v.major), u64::from(v.minor))))
                .collect();
            if inside.is_empty() {
                return Err(err(format!("no supported version lies in `{part}`")));
            }
            out.extend(inside);
        } else {
            out.push(
                part.parse()
                    .map_err(|e: crate::toolchain::versions::UnknownVersion| err(e.to_string()))?,
            );
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(err("it names no version".into()));
    }
    Ok(out)
}

/// Parses `openkruise@v1.6.0,v1.7.0,openkruise@v1.9.0` (a bare tag reuses the previous name).
pub fn parse_controllers(spec: &str) -> Result<Vec<ControllerRef>, MatrixError> {
    let mut out: Vec<ControllerRef> = vec![];
    let mut name: Option<String> = None;
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let full = if part.contains('@') {
            name = part.split('@').next().map(String::from);
            part.to_string()
        } else {
            match &name {
                Some(n) => format!("{n}@{part}"),
                None => {
                    return Err(MatrixError::Controllers {
                        given: spec.into(),
                        detail: format!(
                            "`{part}` has no controller name; write {}@{part}",
                            ControllerRef::default_ref().kind.name()
                        ),
                    });
                }
            }
        };
        let r: ControllerRef =
            full.parse()
                .map_err(|e: crate::controller::RefError| MatrixError::Controllers {
                    given: spec.into(),
                    detail: e.to_string(),
                })?;
        if !out.contains(&r) {
            out.push(r);
        }
    }
    if out.is_empty() {
        return Err(MatrixError::Controllers {
            given: spec.into(),
            detail: "it names no controller".into(),
        });
    }
    Ok(out)
}

/// `ci/matrix.yaml`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MatrixFile {
    /// Kubernetes versions (range or list).
    pub kubernetes: String,
    /// Controllers.
    pub controllers: String,
}

impl MatrixFile {
    /// Reads one.
    pub fn load(path: &Path) -> Result<Self, MatrixError> {
        let err = |detail: String| MatrixError::File {
            path: path.display().to_string(),
            detail,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_expand_ranges_over_supported_releases() {
        let v: Vec<String> = parse_versions("1.20..1.33")
            .unwrap()
            .iter()
            .map(|v| v.minor_string())
            .collect();
        assert_eq!(v, ["1.29", "1.32"]);
        let v: Vec<String> = parse_versions("1.37,1.32,1.32")
            .unwrap()
            .iter()
            .map(|v| v.minor_string())
            .collect();
        assert_eq!(v, ["1.32", "1.37"]);
        assert!(
            parse_versions("1.10..1.12")
                .unwrap_err()
                .to_string()
                .contains("no supported version")
        );
        assert!(parse_versions("1.31").is_err());
    }

    #[test]
    fn controllers_reuse_the_previous_name() {
        let c: Vec<String> = parse_controllers("openkruise@v1.6.0,v1.7.0,openkruise@v1.9.0")
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            c,
            [
                "openkruise@v1.6.0",
                "openkruise@v1.7.0",
                "openkruise@v1.9.0"
            ]
        );
        assert!(
            parse_controllers("v1.6.0")
                .unwrap_err()
                .to_string()
                .contains("no controller name")
        );
    }

    #[test]
    fn the_checked_in_matrix_file_parses() {
        let f = MatrixFile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../ci/matrix.yaml"))
            .unwrap();
        assert!(!parse_versions(&f.kubernetes).unwrap().is_empty());
        assert_eq!(parse_controllers(&f.controllers).unwrap().len(), 5);
    }
}
