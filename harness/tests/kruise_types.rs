//! The committed OpenKruise types are what kopium generates from the default release's own
//! CRDs. The test command checks that the release's CRDs are those the types were generated
//! from (their digests, in `src/kruise/crds.sha256`); the nightly tier builds kopium into the
//! harness cache and regenerates the types. `HARNESS_UPDATE_GOLDEN=1` with `--ignored`
//! rewrites both.

use std::path::{Path, PathBuf};
use std::process::Command;

use harness::kruise::{API_VERSION, GENERATED};
use harness::progress::Progress;
use harness::toolchain::{Cache, KubeVersion, Toolchain};
use serde_json::Value;

/// Where the digests of the CRDs the committed types were generated from are.
fn digests_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kruise/crds.sha256")
}

/// Each generated CRD of the default release, as it ships.
async fn release_crds(toolchain: &Toolchain) -> Vec<(&'static str, &'static str, Value)> {
    let kubectl = toolchain
        .kubernetes(KubeVersion::default_version())
        .await
        .unwrap()
        .path("kubectl");
    let docs = harness::controller::openkruise::render(
        &kubectl,
        harness::controller::openkruise::DEFAULT_VERSION,
    )
    .await
    .unwrap();
    GENERATED
        .iter()
        .map(|&(crd, stem)| {
            let doc = docs
                .iter()
                .find(|d| d["kind"] == "CustomResourceDefinition" && d["metadata"]["name"] == crd)
                .unwrap_or_else(|| panic!("the release ships {crd}"));
            (crd, stem, doc.clone())
        })
        .collect()
}

/// The digests file for `crds`: one line per CRD, its digest and its name.
fn digests(crds: &[(&str, &str, Value)]) -> String {
    crds.iter()
        .map(|(crd, _, doc)| {
            let digest = harness::toolchain::oci::sha256(&serde_json::to_vec(doc).unwrap());
            format!("{digest}  {crd}\n")
        })
        .collect()
}

#[tokio::test]
async fn the_release_crds_are_those_the_types_were_generated_from() {
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let crds = release_crds(&toolchain).await;
    let committed = std::fs::read_to_string(digests_file()).unwrap_or_default();
    assert_eq!(
        committed,
        digests(&crds),
        "the default release's CRDs are not those the OpenKruise types were generated from; \
         regenerate them: HARNESS_UPDATE_GOLDEN=1 cargo test -p harness --test kruise_types -- --ignored"
    );
}

#[tokio::test]
#[ignore = "nightly tier: builds kopium"]
async fn generated_kruise_types_match_the_release_crds() {
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let kopium = toolchain.kopium().await.unwrap();
    let crds = release_crds(&toolchain).await;
    let update = std::env::var_os("HARNESS_UPDATE_GOLDEN").is_some();
    if update {
        std::fs::write(digests_file(), digests(&crds)).unwrap();
    }
    let work = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kruise");
    for (crd, stem, doc) in &crds {
        let file = format!("{crd}.yaml");
        std::fs::write(work.path().join(&file), serde_json::to_string(doc).unwrap()).unwrap();
        let out = Command::new(&kopium)
            .current_dir(work.path())
            .args(["-f", &file, "--api-version", API_VERSION])
            .output()
            .expect("kopium runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let generated = String::from_utf8(out.stdout).unwrap();
        let path = src.join(format!("{stem}.rs"));
        if update {
            std::fs::write(&path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} differs from what kopium generates for {crd}; rerun with HARNESS_UPDATE_GOLDEN=1",
            path.display()
        );
    }
}
