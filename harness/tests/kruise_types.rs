//! The committed OpenKruise types are what kopium generates from the default release's own
//! CRDs (kopium is built into the harness cache on first use); `HARNESS_UPDATE_GOLDEN=1`
//! rewrites them.

use std::path::Path;
use std::process::Command;

use harness::kruise::{API_VERSION, GENERATED};
use harness::progress::Progress;
use harness::toolchain::{Cache, KubeVersion, Toolchain};

#[tokio::test]
async fn generated_kruise_types_match_the_release_crds() {
    let toolchain = Toolchain::new(Cache::from_env(), Progress::plain());
    let kopium = toolchain.kopium().await.unwrap();
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
    let work = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kruise");
    for (crd, stem) in GENERATED {
        let doc = docs
            .iter()
            .find(|d| d["kind"] == "CustomResourceDefinition" && d["metadata"]["name"] == *crd)
            .unwrap_or_else(|| panic!("the release ships {crd}"));
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
        if std::env::var_os("HARNESS_UPDATE_GOLDEN").is_some() {
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
