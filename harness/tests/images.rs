//! The images of real nodes and the local registry that serves them: built with the real
//! toolchain cache, pushed into a registry started with a fresh CA, read back through the
//! registry API, and imported by a throwaway containerd.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use harness::cluster::local::free_port;
use harness::cluster::local::pki::Pki;
use harness::cluster::local::registry::{
    self, Registry, RegistryClient, RegistryLayout, RegistryTls,
};
use harness::process::{ComponentSpec, ProcRecord, Process};
use harness::progress::Progress;
use harness::toolchain::host::DebianPackage;
use harness::toolchain::images::{self, HARNESS_IMAGES, ImageName};
use harness::toolchain::{BuiltImage, Cache, Toolchain, ToolchainError, oci};
use harness::wait::{self, Check};

fn toolchain() -> Toolchain {
    Toolchain::new(Cache::from_env(), Progress::plain())
}

/// A registry with its own CA in a temp dir. Fields drop in order: the process ends before
/// its directory is removed.
struct RunningRegistry {
    registry: Registry,
    ca_pem: String,
    dir: tempfile::TempDir,
}

impl RunningRegistry {
    async fn start(binary: &Path) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("harness-registry-")
            .tempdir()
            .unwrap();
        let pki = Pki::generate(&dir.path().join("pki")).unwrap();
        let ca_pem = pki.ca_pem().unwrap();
        let registry = Registry::start(
            binary,
            RegistryLayout::new(dir.path().join("registry")),
            free_port().unwrap(),
            &RegistryTls::from_pki(&pki),
            &ca_pem,
            Duration::from_secs(30),
        )
        .await
        .expect("the registry starts");
        Self {
            registry,
            ca_pem,
            dir,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_image_is_pushed_and_served_back_by_the_registry() {
    let tc = toolchain();
    let started = Instant::now();
    let binary = tc.registry().await.expect("the registry builds");
    eprintln!("registry binary ready in {:.1?}", started.elapsed());
    let started = Instant::now();
    let built = tc.images().await.expect("the images build");
    eprintln!("images ready in {:.1?}", started.elapsed());
    let names: Vec<String> = built.iter().map(|i| i.name.to_string()).collect();
    assert_eq!(names, HARNESS_IMAGES);
    // A second call is answered by the cache with the same digests.
    let started = Instant::now();
    assert_eq!(tc.images().await.unwrap(), built);
    eprintln!("cached images in {:.1?}", started.elapsed());
    let v1 = &built[1];
    let v2 = &built[2];
    assert_ne!(v1.digest(), v2.digest());
    assert_eq!(v1.layout.layers.len(), 1);

    let running = RunningRegistry::start(&binary).await;
    let port = running.registry.port;
    let started = Instant::now();
    registry::push(&built, port, &running.ca_pem)
        .await
        .expect("every image is pushed");
    eprintln!("pushed {} images in {:.1?}", built.len(), started.elapsed());
    // A second push finds every blob there.
    registry::push(&built, port, &running.ca_pem)
        .await
        .expect("a second push is harmless");

    let client = RegistryClient::new(port, &running.ca_pem).unwrap();
    for image in &built {
        check_served(&client, image).await;
    }

    let record = running.registry.record().clone();
    let dir = running.dir.path().to_path_buf();
    assert!(record.alive());
    drop(running);
    assert!(!record.alive(), "the registry process is gone");
    assert!(!dir.exists(), "{} is removed", dir.display());
}

async fn check_served(client: &RegistryClient, image: &BuiltImage) {
    let ImageName { repo, tag, .. } = &image.name;
    let (digest, body) = client.manifest(repo, tag).await.expect("manifest by tag");
    assert_eq!(digest, image.digest(), "{}", image.name);
    assert_eq!(oci::sha256(&body), image.digest());
    let manifest: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(manifest["mediaType"], oci::MANIFEST_MEDIA_TYPE);
    let mut blobs = vec![manifest["config"]["digest"].as_str().unwrap().to_string()];
    for l in manifest["layers"].as_array().unwrap() {
        blobs.push(l["digest"].as_str().unwrap().to_string());
    }
    for d in &blobs {
        // `blob` checks the content against its digest.
        let bytes = client.blob(repo, d).await.expect("blob");
        assert_eq!(bytes, image.read_blob(d).unwrap());
    }
    let config: serde_json::Value =
        serde_json::from_slice(&client.blob(repo, &blobs[0]).await.unwrap()).unwrap();
    assert_eq!(config["architecture"], "amd64");
    assert_eq!(config["os"], "linux");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_dropped_by_a_panic_is_stopped_and_its_directory_removed() {
    let binary = toolchain().registry().await.expect("the registry builds");
    let (tx, rx) = tokio::sync::oneshot::channel::<(ProcRecord, PathBuf)>();
    let task = tokio::spawn(async move {
        let running = RunningRegistry::start(&binary).await;
        let _ = tx.send((
            running.registry.record().clone(),
            running.dir.path().to_path_buf(),
        ));
        panic!("a scenario fails while the registry runs");
    });
    let joined = task.await;
    assert!(joined.is_err_and(|e| e.is_panic()));
    let (record, dir) = rx.await.expect("the registry started before the panic");
    assert!(!record.alive(), "the registry process is gone");
    assert!(!dir.exists(), "{} is removed", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_programs_are_static_and_behave() {
    let programs = toolchain().image_programs().await.expect("programs build");
    for p in ["pause", "health"] {
        let bytes = std::fs::read(programs.binary(p)).unwrap();
        assert!(images::is_static_elf(&bytes), "{p} is static");
    }
    let tmp = tempfile::tempdir().unwrap();

    // pause exits 0 on SIGTERM.
    let mut pause = Process::spawn(
        &ComponentSpec {
            name: "pause".into(),
            binary: programs.binary("pause"),
            args: vec![],
            env: vec![],
            clear_env: false,
            dir: None,
        },
        &tmp.path().join("pause.log"),
    )
    .unwrap();
    let record = pause.record().clone();
    // It announces itself once its signal handlers are in place.
    wait::poll(
        "pause to announce itself",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || {
            let log = pause.log_tail(5);
            async move { Check::when(log.contains("pause: waiting"), || format!("log: {log:?}")) }
        },
    )
    .await
    .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(record.pid as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    wait::poll(
        "pause to exit",
        Duration::from_secs(10),
        Duration::from_millis(20),
        || {
            let exited = pause.exited();
            async move { Check::when(exited.is_some(), || "still running".into()) }
        },
    )
    .await
    .unwrap();
    assert_eq!(pause.exited().unwrap(), "exit status: 0");

    // health answers on $PORT and manages its marker files itself.
    let port = free_port().unwrap();
    let docroot = tmp.path().join("html");
    std::fs::create_dir_all(docroot.join("empty")).unwrap();
    std::fs::write(docroot.join("index.html"), "stand-in\n").unwrap();
    let mut health = Process::spawn(
        &ComponentSpec {
            name: "health".into(),
            binary: programs.binary("health"),
            args: vec![],
            env: vec![
                ("PORT".into(), port.to_string()),
                ("HARNESS_IMAGE_VERSION".into(), "v1".into()),
                ("DOCROOT".into(), docroot.display().to_string()),
            ],
            clear_env: false,
            dir: None,
        },
        &tmp.path().join("health.log"),
    )
    .unwrap();
    wait::poll(
        "health to answer /healthz",
        Duration::from_secs(10),
        Duration::from_millis(50),
        || async move { Check::from_result(http_get(port, "/healthz").await.map(|_| ())) },
    )
    .await
    .unwrap();
    assert!(
        http_get(port, "/healthz")
            .await
            .unwrap()
            .starts_with("HTTP/1.0 200")
    );
    assert!(
        http_get(port, "/readyz")
            .await
            .unwrap()
            .starts_with("HTTP/1.0 200")
    );
    assert!(
        http_get(port, "/version")
            .await
            .unwrap()
            .ends_with("\r\n\r\nv1\n")
    );
    // The document root is served as nginx serves it: a file by its path, a directory by its
    // index.html; a missing file is 404 and a directory without an index is 403, never a
    // redirect to a listing (specs move index.html away to fail a readiness probe).
    let get = |path: &'static str| async move { http_get(port, path).await.unwrap() };
    let index = get("/index.html").await;
    assert!(index.starts_with("HTTP/1.0 200"), "{index}");
    assert!(index.ends_with("\r\n\r\nstand-in\n"), "{index}");
    assert!(get("/").await.ends_with("\r\n\r\nstand-in\n"));
    assert!(get("/empty").await.starts_with("HTTP/1.0 403"));
    assert!(get("/no-such-file").await.starts_with("HTTP/1.0 404"));
    std::fs::rename(docroot.join("index.html"), tmp.path().join("index.html")).unwrap();
    let moved = get("/index.html").await;
    assert!(moved.starts_with("HTTP/1.0 404"), "{moved}");
    let root = get("/").await;
    assert!(root.starts_with("HTTP/1.0 403"), "{root}");
    health.stop(Duration::from_secs(5));
    let marker = tmp.path().join("unready");
    for (verb, exists) in [("touch", true), ("rm", false)] {
        let status = std::process::Command::new(programs.binary("health"))
            .arg(verb)
            .arg(&marker)
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(marker.exists(), exists);
    }
}

async fn http_get(port: u16, path: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out)
        .await
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// Set in the child process of [`missing_go_is_named_with_its_fix`].
const CHILD: &str = "HARNESS_IMAGES_TEST_CHILD";

#[tokio::test]
async fn missing_go_is_named_with_its_fix() {
    if std::env::var_os(CHILD).is_some() {
        // The child: HARNESS_GO points nowhere and the cache is empty.
        let err = toolchain().image_programs().await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("Go is needed"), "{text}");
        assert!(text.contains("HARNESS_GO"), "{text}");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "missing_go_is_named_with_its_fix", "--nocapture"])
        .env(CHILD, "1")
        .env("HARNESS_GO", "/nonexistent/go")
        .env("HARNESS_CACHE_DIR", cache.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

const CONTAINERD: DebianPackage = DebianPackage {
    package: "containerd",
    binaries: &["containerd"],
};

/// A containerd of its own (root, state and socket in a temp dir); ended when dropped.
struct Containerd {
    process: Process,
    socket: PathBuf,
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.process.stop(Duration::from_secs(10));
    }
}

impl Containerd {
    async fn start(binary: &Path, dir: &Path) -> Self {
        let socket = dir.join("containerd.sock");
        let config = dir.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "version = 2\nroot = {root:?}\nstate = {state:?}\n\
                 disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\n\
                 [grpc]\n  address = {socket:?}\n\n[ttrpc]\n  address = {ttrpc:?}\n",
                root = dir.join("root").display().to_string(),
                state = dir.join("state").display().to_string(),
                socket = socket.display().to_string(),
                ttrpc = dir.join("containerd.sock.ttrpc").display().to_string(),
            ),
        )
        .unwrap();
        let mut process = Process::spawn(
            &ComponentSpec {
                name: "containerd".into(),
                binary: binary.to_path_buf(),
                args: vec!["--config".into(), config.display().to_string()],
                env: vec![],
                clear_env: false,
                dir: None,
            },
            &dir.join("containerd.log"),
        )
        .unwrap();
        let log = dir.join("containerd.log");
        let s = socket.clone();
        let waited = wait::poll(
            "containerd to answer `ctr version`",
            Duration::from_secs(30),
            Duration::from_millis(100),
            || {
                let exited = process.exited();
                let s = s.clone();
                async move {
                    if let Some(status) = exited {
                        return Check::Failed(format!("containerd exited ({status})"));
                    }
                    Check::from_result(ctr(&s, &["version"]).await.map(|_| ()))
                }
            },
        )
        .await;
        if let Err(e) = waited {
            let tail = harness::process::log_tail(&log, 30);
            process.stop(Duration::from_secs(5));
            panic!("{e}\n{tail}");
        }
        Self { process, socket }
    }
}

async fn ctr(socket: &Path, args: &[&str]) -> Result<String, String> {
    let out = tokio::process::Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["--namespace", "harness"])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("run ctr: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ctr {} exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).to_string())
}

/// `ctr`'s `hosts.toml` for a host served by the registry on `port`, trusting `ca` (`ctr` reads
/// a hosts directory, not the CRI plugin's configuration that real nodes use).
fn hosts_toml(port: u16, ca: &Path) -> String {
    let url = registry::endpoint(port);
    format!(
        "server = \"{url}\"\n\n[host.\"{url}\"]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = {}\n",
        serde_json::to_string(&ca.display().to_string()).unwrap()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_imports_the_busybox_archive_and_pulls_through_hosts_toml() {
    let tc = toolchain();
    // Only a containerd that is not there (and cannot be installed without root) skips the
    // test, and not in CI; any other error is a failure.
    let containerd = match tc.debian_binary(CONTAINERD).await {
        Ok(p) => p,
        Err(ToolchainError::ToolMissing { tool, fix }) => {
            common::missing_prerequisite(&tool, &fix);
            return;
        }
        Err(e) => panic!("find containerd: {e}"),
    };
    let images = tc.images().await.expect("the images build");
    let busybox = images
        .iter()
        .find(|i| i.name.to_string() == images::BUSYBOX_V1_IMAGE)
        .unwrap();
    let dir = tempfile::Builder::new()
        .prefix("harness-ctr-")
        .tempdir()
        .unwrap();
    let archive = dir.path().join("busybox-v1.tar");
    images::write_oci_archive(busybox, &archive).unwrap();

    let running = Containerd::start(&containerd, dir.path()).await;
    let record = running.process.record().clone();
    let archive_arg = archive.display().to_string();
    // The native snapshotter works on any file system: the unpack proves the layer is sound.
    ctr(
        &running.socket,
        &["images", "import", "--snapshotter", "native", &archive_arg],
    )
    .await
    .expect("ctr imports the archive");
    let listed = ctr(&running.socket, &["images", "ls"]).await.unwrap();
    let line = listed
        .lines()
        .find(|l| l.starts_with(images::BUSYBOX_V1_IMAGE))
        .unwrap_or_else(|| panic!("{} in:\n{listed}", images::BUSYBOX_V1_IMAGE));
    assert!(line.contains(busybox.digest()), "{line}");
    let check = ctr(&running.socket, &["images", "check"]).await.unwrap();
    assert!(check.contains("complete"), "{check}");
    let snapshots = ctr(
        &running.socket,
        &["snapshots", "--snapshotter", "native", "ls"],
    )
    .await
    .unwrap();
    assert!(
        snapshots.lines().count() > 1,
        "the layer is unpacked: {snapshots}"
    );

    // Pulling by name through hosts.toml reaches the local registry and trusts its CA.
    let registry_binary = tc.registry().await.expect("the registry builds");
    let served = RunningRegistry::start(&registry_binary).await;
    registry::push(&images, served.registry.port, &served.ca_pem)
        .await
        .unwrap();
    let ca = served.dir.path().join("pki").join("ca.crt");
    let hosts = dir.path().join("certs.d");
    std::fs::create_dir_all(hosts.join(images::IMAGE_HOST)).unwrap();
    std::fs::write(
        hosts.join(images::IMAGE_HOST).join("hosts.toml"),
        hosts_toml(served.registry.port, &ca),
    )
    .unwrap();
    let hosts_arg = hosts.display().to_string();
    ctr(
        &running.socket,
        &[
            "images",
            "pull",
            "--hosts-dir",
            &hosts_arg,
            "--snapshotter",
            "native",
            images::BUSYBOX_V2_IMAGE,
        ],
    )
    .await
    .expect("ctr pulls through hosts.toml");
    let listed = ctr(&running.socket, &["images", "ls"]).await.unwrap();
    let v2 = images
        .iter()
        .find(|i| i.name.to_string() == images::BUSYBOX_V2_IMAGE)
        .unwrap();
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with(images::BUSYBOX_V2_IMAGE) && l.contains(v2.digest())),
        "{listed}"
    );
    drop(served);
    drop(running);
    assert!(!record.alive(), "containerd is gone");
}
