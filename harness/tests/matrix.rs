//! Matrices and qualification end to end on real clusters and releases.

use std::process::Command;

use serde_json::Value;

struct Out {
    code: Option<i32>,
    stdout: String,
    dir: std::path::PathBuf,
    _reports: tempfile::TempDir,
}

fn harness(args: &[&str]) -> Out {
    let reports = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .arg("--report-dir")
        .arg(reports.path())
        .env("HARNESS_STATE_DIR", state.path())
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        dir: std::fs::canonicalize(reports.path().join("latest")).unwrap(),
        _reports: reports,
    }
}

fn json(path: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn outcome<'a>(cell: &'a Value, scenario: &str) -> &'a Value {
    &cell["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["scenario"] == scenario)
        .unwrap_or_else(|| panic!("{scenario} ran"))["outcome"]
}

/// The grid of `out` links every cell to its own report, and each cell's reports are there.
fn cells_link_their_reports(out: &Out, cells: &[Value]) {
    let html = std::fs::read_to_string(out.dir.join("matrix.html")).unwrap();
    for c in cells {
        let dir = c["dir"].as_str().unwrap();
        assert!(
            html.contains(&format!("href=\"{dir}/report.html\"")),
            "{dir}"
        );
        assert!(out.dir.join(dir).join("report.html").is_file());
        assert!(out.dir.join(dir).join("junit.xml").is_file());
    }
}

const S3: &str = "sidecarset/in-place-update-with-injected-sidecar";

#[test]
#[ignore = "nightly tier: builds Kubernetes 1.37 and OpenKruise v1.6.0"]
fn a_small_matrix_places_the_known_bugs_exactly() {
    let out = harness(&[
        "matrix",
        "--k8s",
        "1.32,1.37",
        "--controller",
        "openkruise@v1.6.0,v1.9.0",
        "--labels",
        "seed",
    ]);
    let m = json(&out.dir.join("matrix.json"));
    let failures: Vec<String> = m["cells"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["results"].as_array().unwrap().iter())
        .filter(|r| r["outcome"]["kind"] == "fail")
        .map(|r| format!("{}: {}", r["scenario"], r["failure"]))
        .collect();
    assert_eq!(out.code, Some(0), "{}\n{failures:#?}", out.stdout);
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let cell = |k: &str, c: &str| {
        cells
            .iter()
            .find(|x| {
                x["kubernetes"]["minor"] == k.parse::<u32>().unwrap()
                    && x["controller"]["version"] == c
            })
            .unwrap()
    };
    // The S3 bug lives only on 1.27-1.32.
    assert_eq!(outcome(cell("32", "v1.6.0"), S3)["kind"], "expected-fail");
    assert_eq!(outcome(cell("37", "v1.6.0"), S3)["kind"], "pass");
    for k in ["32", "37"] {
        assert_eq!(cell(k, "v1.9.0")["worst"], "pass");
        assert_eq!(cell(k, "v1.6.0")["worst"], "expected-fail");
    }
    // The grid links every cell to its own report and names the bugs where they live.
    cells_link_their_reports(&out, cells);
    let html = std::fs::read_to_string(out.dir.join("matrix.html")).unwrap();
    let row_132 = html
        .split("<tr><th>1.32.5</th>")
        .nth(1)
        .unwrap()
        .split("</tr>")
        .next()
        .unwrap();
    let row_137 = html
        .split("<tr><th>1.37.1</th>")
        .nth(1)
        .unwrap()
        .split("</tr>")
        .next()
        .unwrap();
    assert!(row_132.contains("kruise-sidecarset-resize-policy"));
    assert!(!row_137.contains("kruise-sidecarset-resize-policy"));
}

/// The same matrix in two shards, merged, reports what the unsharded run reported (on the
/// versions the test tier builds anyway: the known bugs of v1.7.0 on one cell). The unsharded
/// run also explores each cell (`--explore`): same seed on both, findings beside each cell.
#[test]
fn a_matrix_in_two_shards_merges_to_what_the_unsharded_run_reports() {
    // The two seeds whose results differ between these releases (one cluster a cell); every
    // seed's result on each release is `tests/run.rs`'s.
    let args = [
        &[
            "matrix",
            "--k8s",
            "1.32",
            "--controller",
            "openkruise@v1.7.0,v1.9.0",
        ][..],
        &FOCUS_S1_S4[..],
    ]
    .concat();
    let explore = ["--explore", "30s", "--explore-kinds", "CloneSet"];
    let out = harness(&[&args[..], &explore[..]].concat());
    assert_eq!(out.code, Some(0), "{}", out.stdout);
    let m = json(&out.dir.join("matrix.json"));
    let cells = m["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    // Each cell was explored, with one seed, into its own directory, listed after the grid.
    let html = std::fs::read_to_string(out.dir.join("matrix.html")).unwrap();
    for c in cells {
        let e = &c["exploration"];
        assert!(e["trials"].as_u64().unwrap() > 0, "{c}");
        assert_eq!(e["seed"], cells[0]["exploration"]["seed"]);
        let dir = e["dir"].as_str().unwrap();
        let summary = json(&out.dir.join(dir).join("explore.json"));
        assert_eq!(
            summary["controller"],
            c["controller"]["version"]
                .as_str()
                .map(|v| format!("openkruise@{v}"))
                .unwrap()
        );
        assert_eq!(
            e["findings"].as_array().unwrap().len(),
            summary["findings"].as_array().unwrap().len()
        );
        assert!(
            html.contains(&format!("href=\"{dir}/report.html\"")),
            "{dir}"
        );
        assert!(out.dir.join(dir).join("report.html").is_file());
        let line = format!(
            "explored Kubernetes 1.32.5 x {}",
            summary["controller"].as_str().unwrap()
        );
        assert!(out.stdout.contains(&line), "{}", out.stdout);
    }
    let cell = |c: &str| {
        cells
            .iter()
            .find(|x| x["controller"]["version"] == c)
            .unwrap()
    };
    assert_eq!(cell("v1.9.0")["worst"], "pass");
    assert_eq!(cell("v1.7.0")["worst"], "expected-fail");
    for s in S1_S4 {
        assert_eq!(outcome(cell("v1.7.0"), s)["kind"], "expected-fail", "{s}");
        assert_eq!(outcome(cell("v1.9.0"), s)["kind"], "pass", "{s}");
    }
    cells_link_their_reports(&out, cells);
    let shards: Vec<Out> = ["1/2", "2/2"]
        .iter()
        .map(|k| {
            let mut a = args.to_vec();
            a.extend(["--shard", k]);
            harness(&a)
        })
        .collect();
    for (k, shard) in shards.iter().enumerate() {
        let m = json(&shard.dir.join("matrix.json"));
        assert_eq!(m["shard"]["index"], k + 1);
        assert_eq!(m["cells"].as_array().unwrap().len(), 1, "balanced: {m}");
    }
    let merged = harness(
        &[
            &["report", "merge"][..],
            &shards
                .iter()
                .map(|s| s.dir.to_str().unwrap())
                .collect::<Vec<_>>(),
        ]
        .concat(),
    );
    assert_eq!(merged.code, out.code, "{}", merged.stdout);
    let whole = json(&merged.dir.join("matrix.json"));
    assert_eq!(stable(&whole), stable(&m), "merged matrix.json");
    assert!(whole.get("shard").is_none());
    let junit_cases = |dir: &std::path::Path| {
        let xml = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
        let r = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        let mut cases: Vec<String> = r
            .test_suites
            .iter()
            .flat_map(|s| {
                s.test_cases.iter().map(move |c| {
                    format!(
                        "{} {} {:?}",
                        s.name.as_str(),
                        c.name.as_str(),
                        std::mem::discriminant(&c.status)
                    )
                })
            })
            .collect();
        cases.sort();
        (r.tests, r.failures, cases)
    };
    assert_eq!(junit_cases(&merged.dir), junit_cases(&out.dir), "junit.xml");
    let links = |dir: &std::path::Path| {
        let html = std::fs::read_to_string(dir.join("matrix.html")).unwrap();
        // The unsharded run's explorations aside.
        let mut l: Vec<String> = html
            .split("href=\"")
            .skip(1)
            .map(|x| x.split('"').next().unwrap().to_string())
            .filter(|l| !l.starts_with("explore/"))
            .collect();
        l.sort();
        l
    };
    assert_eq!(links(&merged.dir), links(&out.dir), "matrix.html links");
    for c in whole["cells"].as_array().unwrap() {
        let dir = c["dir"].as_str().unwrap();
        assert!(merged.dir.join(dir).join("report.json").is_file(), "{dir}");
    }
}

/// A matrix report without what differs from run to run: ids, times, failure texts and
/// diagnostics (which name random namespaces).
fn stable(m: &Value) -> Value {
    let cells: Vec<Value> = m["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let results: Vec<Value> = c["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "scenario": r["scenario"],
                        "suite": r["suite"],
                        "attempt": r["attempt"],
                        "profile": r["profile"],
                        "outcome": r["outcome"],
                        "failed": r["failure"].is_string(),
                    })
                })
                .collect();
            serde_json::json!({
                "kubernetes": c["kubernetes"],
                "controller": c["controller"],
                "dir": c["dir"],
                "worst": c["worst"],
                "results": results,
            })
        })
        .collect();
    Value::Array(cells)
}

#[test]
fn a_cell_that_cannot_start_is_an_infrastructure_error_and_the_others_run() {
    // The module proxy does not serve v1.7.4, so that cell's controller cannot be built.
    let out = harness(&[
        "matrix",
        "--k8s",
        "1.32",
        "--controller",
        "openkruise@v1.7.4,v1.9.0",
        "--focus",
        "native-deployment",
    ]);
    assert_eq!(out.code, Some(3), "{}", out.stdout);
    let m = json(&out.dir.join("matrix.json"));
    let cells = m["cells"].as_array().unwrap();
    // The cells' results, reasons included, are the evidence when either assertion fails.
    assert_eq!(cells[0]["worst"], "INFRA-ERROR", "{:#}", m["cells"]);
    assert_eq!(cells[1]["worst"], "pass", "{:#}", m["cells"]);
}

fn qualify(candidate: &str, baseline: &str, extra: &[&str]) -> (Out, Value) {
    // As the matrix above: the seeds whose results differ between the releases.
    let mut args = vec!["qualify", "--candidate", candidate, "--baseline", baseline];
    args.extend(FOCUS_S1_S4);
    args.extend(extra);
    let out = harness(&args);
    let q = json(&out.dir.join("qualify.json"));
    (out, q)
}

fn scenarios(list: &Value) -> Vec<String> {
    let mut v: Vec<String> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["scenario"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

const S1_S4: [&str; 2] = [
    "workloadspread/cloneset-volume-claim-templates",
    "workloadspread/deployment-priority-class-patch",
];

/// The arguments that run [`S1_S4`] only.
const FOCUS_S1_S4: [&str; 4] = ["--focus", S1_S4[0], "--focus", S1_S4[1]];

#[test]
fn qualifying_the_fixed_release_reports_fixes_and_no_regression() {
    // With an exploration of the candidate against the baseline beside the verdict.
    let explore = ["--explore", "40s", "--explore-kinds", "CloneSet"];
    let (out, q) = qualify("openkruise@v1.9.0", "v1.7.0", &explore);
    assert_eq!(out.code, Some(0), "{}", out.stdout);
    assert_eq!(scenarios(&q["fixes"]), S1_S4);
    assert!(q["regressions"].as_array().unwrap().is_empty());
    // The upgrade keeps every pod and PVC and leaves no orphan.
    let upgrades = q["upgrades"].as_array().unwrap();
    assert_eq!(upgrades.len(), 1);
    assert_eq!(
        upgrades[0]["problems"],
        serde_json::json!([]),
        "{}",
        upgrades[0]
    );
    assert!(out.stdout.contains("clean"));
    // The exploration ran on both releases, and its findings are listed, not judged.
    let e = &q["exploration"];
    assert!(e["trials"].as_u64().unwrap() > 0, "{e}");
    let summary = json(&out.dir.join("explore").join("explore.json"));
    assert_eq!(summary["controller"], "openkruise@v1.9.0");
    assert_eq!(summary["baseline"], "openkruise@v1.7.0");
    assert_eq!(
        e["findings"].as_array().unwrap().len(),
        summary["findings"].as_array().unwrap().len(),
        "{e}"
    );
    assert!(out.dir.join("explore").join("report.html").is_file());
    assert!(
        out.stdout
            .contains("explored openkruise@v1.9.0 against openkruise@v1.7.0"),
        "{}",
        out.stdout
    );
}

#[test]
fn explore_goes_with_an_unsharded_run_and_known_kinds() {
    let qualify: &[&str] = &[
        "qualify",
        "--candidate",
        "openkruise@v1.9.0",
        "--baseline",
        "v1.7.0",
        "--labels",
        "seed",
    ];
    let matrix: &[&str] = &[
        "matrix",
        "--k8s",
        "1.32",
        "--controller",
        "openkruise@v1.9.0",
    ];
    for (base, run) in [(qualify, "qualification"), (matrix, "matrix")] {
        let (code, _, err) = plan_only(&[base, &["--explore", "1m", "--shard", "1/2"]].concat());
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains(&format!("--explore goes with an unsharded {run}")),
            "{err}"
        );
        let kinds = ["--explore", "1m", "--explore-kinds", "Nothing"];
        let (code, _, err) = plan_only(&[base, &kinds[..]].concat());
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains("no kind `Nothing`"), "{err}");
    }
}

#[test]
fn qualifying_the_old_release_against_the_new_reports_regressions_and_fails() {
    let (out, q) = qualify("openkruise@v1.7.0", "v1.9.0", &[]);
    assert_eq!(out.code, Some(1), "{}", out.stdout);
    assert_eq!(scenarios(&q["regressions"]), S1_S4);
    assert!(out.stdout.contains("REGRESSION"));
}

/// `matrix` and `qualify` without starting anything: the output and the exit code.
fn plan_only(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(args)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `qualify` of v1.9.0 against v1.8.3 with their upstream suites.
const QUALIFY_UPSTREAM: [&str; 6] = [
    "qualify",
    "--candidate",
    "openkruise@v1.9.0",
    "--baseline",
    "v1.8.3",
    "--upstream-e2e",
];

#[test]
fn an_upstream_matrix_needs_each_cells_suite_or_the_one_asked_for() {
    let matrix = [
        "matrix",
        "--k8s",
        "1.32",
        "--controller",
        "openkruise@v1.8.3,v1.9.0",
        "--binaries",
    ];
    let (code, own, err) = plan_only(&[&matrix[..], &["--upstream-e2e"]].concat());
    assert_eq!(code, Some(0), "{err}");
    let own: Vec<&str> = own.trim().split(',').collect();
    for suite in ["openkruise-e2e-v1.8.3", "openkruise-e2e-v1.9.0"] {
        assert!(own.contains(&suite), "{own:?}");
    }
    let (code, from, err) = plan_only(
        &[
            &matrix[..],
            &[
                "--upstream-e2e-from",
                "openkruise@v1.9.0",
                "--focus",
                "CloneSet",
            ],
        ]
        .concat(),
    );
    assert_eq!(code, Some(0), "{err}");
    let from: Vec<&str> = from.trim().split(',').collect();
    assert!(from.contains(&"openkruise-e2e-v1.9.0"), "{from:?}");
    assert!(!from.contains(&"openkruise-e2e-v1.8.3"), "{from:?}");
    assert!(from.contains(&"openkruise-v1.8.3"), "{from:?}");
    // Scenario selectors mean nothing to the upstream suite, and are refused by name.
    let (code, _, err) =
        plan_only(&[&QUALIFY_UPSTREAM[..], &["--suite", "cloneset", "--plan"]].concat());
    assert_eq!(code, Some(1));
    assert!(err.contains("with --upstream-e2e use --focus"), "{err}");
}

/// The minutes a `--plan` table gives the unit whose line starts with `unit`.
fn planned_minutes(plan: &str, unit: &str) -> f64 {
    let line = plan
        .lines()
        .find(|l| l.starts_with(unit))
        .unwrap_or_else(|| panic!("no unit {unit:?} in {plan}"));
    let expected = line.split_whitespace().last().unwrap();
    let (m, s) = expected
        .trim_end_matches('s')
        .split_once('m')
        .unwrap_or_else(|| panic!("{expected:?} in {line:?}"));
    m.parse::<f64>().unwrap() + s.parse::<f64>().unwrap() / 60.0
}

#[test]
fn upstream_processes_and_real_nodes_reach_matrix_and_qualify() {
    const CELL: &str = "Kubernetes 1.32.5 x openkruise@v1.9.0";
    let matrix = [
        "matrix",
        "--k8s",
        "1.32",
        "--controller",
        "openkruise@v1.9.0",
        "--upstream-e2e",
        "--plan",
    ];
    let (code, one, err) = plan_only(&matrix);
    assert_eq!(code, Some(0), "{err}");
    let shaped = ["--upstream-procs", "4", "--upstream-real-nodes", "3"];
    let (code, four, err) = plan_only(&[&matrix[..], &shaped[..]].concat());
    assert_eq!(code, Some(0), "{err}");
    // Four Ginkgo processes share the suite's specs: a quarter of its time, the cell's
    // bring-up aside.
    let (one, four) = (planned_minutes(&one, CELL), planned_minutes(&four, CELL));
    assert!(four < one / 3.0, "{four} of {one} minutes");
    let (code, q, err) = plan_only(&[&QUALIFY_UPSTREAM[..], &["--plan"], &shaped[..]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(planned_minutes(&q, CELL), four, "{q}");
    // Without the suite they shape, both flags are refused by name, in both commands.
    for (flag, value) in [("--upstream-procs", "4"), ("--upstream-real-nodes", "3")] {
        for base in [&matrix[..5], &QUALIFY_UPSTREAM[..5]] {
            let (code, _, err) = plan_only(&[base, &[flag, value, "--plan"][..]].concat());
            assert_eq!(code, Some(1), "{err}");
            assert!(err.contains(&format!("{flag} ")), "{err}");
            assert!(err.contains("add --upstream-e2e"), "{err}");
        }
    }
}
