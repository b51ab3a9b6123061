//! The registry of controller families: start with [`Family`], a kind of controller the harness
//! can build and install, known by the name a [`ControllerRef`] gives it; [`register`] adds
//! one, [`family`] finds one.

use std::collections::BTreeMap;

use futures::future::BoxFuture;

use super::{Controller, ControllerError, ControllerRef, RefError, openkruise};
use crate::toolchain::{GoEnv, ToolchainError};

/// A kind of controller the harness can build and install, by the name a [`ControllerRef`]
/// gives it (`openkruise` in `openkruise@v1.9.0`): what is known of it before a version is
/// chosen, and how to make the [`Controller`] of one version. [`register`] adds one.
pub trait Family: Send + Sync {
    /// Its name on the command line.
    fn name(&self) -> &'static str;

    /// Other names it answers to.
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// The Go module a checkout of it must declare.
    fn module(&self) -> &'static str;

    /// The version a run uses when none is named.
    fn default_version(&self) -> &'static str;

    /// A note for the user about version `version`, if any (e.g. a tag that aliases another).
    fn note(&self, version: &str) -> Option<String> {
        let _ = version;
        None
    }

    /// Its releases: the versions of its module the module proxy lists.
    fn releases<'a>(&'a self, go: &'a GoEnv) -> BoxFuture<'a, Result<Vec<String>, ToolchainError>>;

    /// The feature gates `reference` knows, read from its sources (sorted).
    fn known_gates<'a>(
        &'a self,
        go: &'a GoEnv,
        reference: &'a ControllerRef,
    ) -> BoxFuture<'a, Result<Vec<String>, ControllerError>>;

    /// The feature gates `reference` registers, each with its default, read from its sources
    /// (the umbrella gates `AllAlpha` and `AllBeta` left out). A family that does not say has
    /// none that can be varied.
    fn gate_defaults<'a>(
        &'a self,
        go: &'a GoEnv,
        reference: &'a ControllerRef,
    ) -> BoxFuture<'a, Result<BTreeMap<String, bool>, ControllerError>> {
        let _ = (go, reference);
        Box::pin(async { Ok(BTreeMap::new()) })
    }

    /// The implementation of `reference`; with `behind_proxy`, its manager talks to the
    /// apiserver through a proxy ([`crate::cluster::proxy`], exposed by
    /// [`Installation::proxy`]) when installed on the local provider.
    fn controller(&self, reference: &ControllerRef, behind_proxy: bool) -> Box<dyn Controller>;
}

/// The registered families, the default first.
static FAMILIES: std::sync::LazyLock<std::sync::RwLock<Vec<&'static dyn Family>>> =
    std::sync::LazyLock::new(|| std::sync::RwLock::new(vec![&openkruise::FAMILY]));

/// Makes `family` known by its name (and aliases) to every [`ControllerRef`] parsed from now
/// on: how a controller the harness does not bundle is brought under test. A name already
/// known is refused.
pub fn register(family: &'static dyn Family) -> Result<(), RefError> {
    let mut all = FAMILIES.write().expect("not poisoned");
    let names = |f: &dyn Family| {
        std::iter::once(f.name())
            .chain(f.aliases().iter().copied())
            .collect::<Vec<_>>()
    };
    for f in all.iter() {
        if let Some(n) = names(family).into_iter().find(|n| names(*f).contains(n)) {
            return Err(RefError::Taken { name: n.into() });
        }
    }
    all.push(family);
    Ok(())
}

/// The family named `name` (or one of its aliases), ignoring case.
pub fn family(name: &str) -> Option<&'static dyn Family> {
    FAMILIES
        .read()
        .expect("not poisoned")
        .iter()
        .copied()
        .find(|f| {
            f.name().eq_ignore_ascii_case(name)
                || f.aliases().iter().any(|a| a.eq_ignore_ascii_case(name))
        })
}

/// The names of the registered families, the default first.
pub fn families() -> Vec<&'static str> {
    FAMILIES
        .read()
        .expect("not poisoned")
        .iter()
        .map(|f| f.name())
        .collect()
}

/// The first registered family, the default.
pub(super) fn first() -> &'static dyn Family {
    FAMILIES.read().expect("not poisoned")[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A family that only answers to its name (no builds, no releases).
    #[derive(Debug)]
    struct Stand(&'static str, &'static [&'static str]);

    impl Family for Stand {
        fn name(&self) -> &'static str {
            self.0
        }
        fn aliases(&self) -> &'static [&'static str] {
            self.1
        }
        fn module(&self) -> &'static str {
            "example.com/stand"
        }
        fn default_version(&self) -> &'static str {
            "v0.1.0"
        }
        fn releases<'a>(
            &'a self,
            _: &'a GoEnv,
        ) -> BoxFuture<'a, Result<Vec<String>, ToolchainError>> {
            Box::pin(async { Ok(vec!["v0.1.0".into()]) })
        }
        fn known_gates<'a>(
            &'a self,
            _: &'a GoEnv,
            _: &'a ControllerRef,
        ) -> BoxFuture<'a, Result<Vec<String>, ControllerError>> {
            Box::pin(async { Ok(vec![]) })
        }
        fn controller(&self, _: &ControllerRef, _: bool) -> Box<dyn Controller> {
            unimplemented!("not installed in unit tests")
        }
    }

    #[test]
    fn a_registered_family_is_parsed_and_read_back_and_its_names_are_its_own() {
        static STAND: Stand = Stand("stand-a", &["stand-alias"]);
        register(&STAND).unwrap();
        let r: ControllerRef = "stand-alias@v0.1.0".parse().unwrap();
        assert_eq!(r.to_string(), "stand-a@v0.1.0");
        assert_eq!(r.family().module(), "example.com/stand");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["controller"], "stand-a");
        let back: ControllerRef = serde_json::from_value(json).unwrap();
        assert_eq!(back, r);
        assert_eq!(r.at("v0.2.0").unwrap().to_string(), "stand-a@v0.2.0");
        // The default stays the first family; a taken name is refused.
        assert_eq!(ControllerRef::default_ref().kind.name(), "openkruise");
        static CLASH: Stand = Stand("stand-b", &["kruise"]);
        let e = register(&CLASH).unwrap_err().to_string();
        assert!(e.contains("`kruise`") && e.contains("taken"), "{e}");
        assert!(family("stand-b").is_none());
        let e = "nope@v1.0.0"
            .parse::<ControllerRef>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("known: openkruise, stand-a"), "{e}");
    }
}
