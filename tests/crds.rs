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

/// Every `format` in the CRDs is one the API server knows (apiextensions' supported formats):
/// another (schemars writes `uint32` for a u32) draws a warning at every `kubectl apply`.
#[test]
fn every_format_is_one_the_api_server_knows() {
    const KNOWN: &[&str] = &[
        "bsonobjectid",
        "uri",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "mac",
        "uuid",
        "uuid3",
        "uuid4",
        "uuid5",
        "isbn",
        "isbn10",
        "isbn13",
        "creditcard",
        "ssn",
        "hexcolor",
        "rgbcolor",
        "byte",
        "password",
        "date",
        "duration",
        "datetime",
        "date-time",
        "int32",
        "int64",
        "float",
        "double",
    ];
    fn formats(value: &serde_json::Value, path: &str, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                if let Some(serde_json::Value::String(f)) = map.get("format") {
                    out.push((path.to_string(), f.clone()));
                }
                for (k, v) in map {
                    formats(v, &format!("{path}.{k}"), out);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|v| formats(v, path, out)),
            _ => {}
        }
    }
    for (file, crd) in eru_operator::crds::all() {
        let mut found = Vec::new();
        formats(&serde_json::to_value(crd).unwrap(), "", &mut found);
        let unknown: Vec<_> = found
            .iter()
            .filter(|(_, f)| !KNOWN.contains(&f.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "crds/{file}: formats the API server does not know: {unknown:?}"
        );
    }
}
