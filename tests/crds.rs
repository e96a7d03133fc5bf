//! `crds/` must be what the Rust types generate: regenerate with `eru-operator crds`.

use std::path::Path;

#[test]
fn committed_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    for (file, crd) in eru_operator::crds::all() {
        let committed = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert!(
            committed == eru_operator::crds::render(&crd),
            "crds/{file} is stale: run `cargo run -- crds` and commit the result"
        );
    }
    fn files(dir: &Path) -> usize {
        (std::fs::read_dir(dir).unwrap().flatten())
            .map(|e| if e.path().is_dir() { files(&e.path()) } else { 1 })
            .sum()
    }
    assert_eq!(
        files(&dir),
        eru_operator::crds::all().len(),
        "crds/ holds a file no type generates"
    );
    // `kubectl apply -f crds/` (not recursive) installs the Eru's CRD alone
    let top: Vec<String> = (std::fs::read_dir(&dir).unwrap().flatten())
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(top, ["eru.yaml"]);
}

#[test]
fn schema_rejects_what_the_api_server_can_check() {
    let eru = serde_json::to_value(eru_operator::crds::all()[0].1.clone()).unwrap();
    let spec = &eru["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"];
    assert_eq!(spec["schedule"]["maxLength"], 128);
    assert!(spec["schedule"]["pattern"].is_string());
    assert_eq!(
        spec["target"]["properties"]["kind"]["enum"],
        serde_json::json!(["Deployment", "StatefulSet", "DaemonSet"])
    );
    assert_eq!(spec["startingDeadlineSeconds"]["default"], 300);
    let memcached = (eru_operator::crds::all().into_iter())
        .find(|(file, _)| file.starts_with("memcached/"))
        .map(|(_, crd)| serde_json::to_value(crd).unwrap())
        .unwrap();
    let size = &memcached["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["size"];
    assert_eq!(size["minimum"], 0.0);
}
