use std::path::{Path, PathBuf};

use super::*;

fn kubeconfig(yaml: &str) -> Kubeconfig {
    Kubeconfig::from_yaml(yaml).unwrap()
}

const TWO_OF_THREE: &str = "
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'https://api:6443'}}]
users: [{name: u, user: {token: t}}]
contexts:
- name: prod-eu
  context:
    cluster: c
    user: u
    extensions:
    - name: eru.mtsre.meitu.com
      extension: {server: 'https://eru.eu:8443', certificate-authority: eu.crt, tls-server-name: eru-operator.eru-system.svc}
- name: kind-dev
  context: {cluster: c, user: u}
- name: prod-us
  context:
    cluster: c
    user: u
    extensions:
    - name: something.else
      extension: {a: 1}
    - name: eru.mtsre.meitu.com
      extension: {server: 'https://eru.us:8443', certificate-authority: /etc/eru/us.crt}
current-context: kind-dev
";

#[test]
fn each_context_with_the_extension_is_a_cluster_named_by_it_and_the_others_are_listed() {
    let found = of(&kubeconfig(TWO_OF_THREE), Some(Path::new("/home/sre/.kube"))).unwrap();
    assert_eq!(
        found.clusters,
        [
            Cluster {
                name: "prod-eu".into(),
                server: "https://eru.eu:8443".into(),
                context: Some("prod-eu".into()),
                // relative: to the kubeconfig's folder, as kubectl reads a cluster's
                cacert: Some(PathBuf::from("/home/sre/.kube/eu.crt")),
                tls_server_name: Some("eru-operator.eru-system.svc".into()),
            },
            Cluster {
                name: "prod-us".into(),
                server: "https://eru.us:8443".into(),
                context: Some("prod-us".into()),
                cacert: Some(PathBuf::from("/etc/eru/us.crt")),
                tls_server_name: None,
            },
        ]
    );
    assert_eq!(found.without, ["kind-dev"]);
    // with no file to read it against (KUBECONFIG merged from several), a relative path is kept
    let merged = of(&kubeconfig(TWO_OF_THREE), None).unwrap();
    assert_eq!(merged.clusters[0].cacert, Some(PathBuf::from("eu.crt")));
}

#[test]
fn a_malformed_extension_is_named_by_its_context() {
    for (extension, says) in [
        ("{server: ''}", "has an empty server"),
        ("{certificate-authority: a.crt}", "missing field `server`"),
        ("{server: 'https://x', sever: typo}", "unknown field `sever`"),
        ("[1, 2]", "does not read"),
    ] {
        let yaml = format!(
            "contexts: [{{name: broken, context: {{cluster: c, extensions: [{{name: eru.mtsre.meitu.com, extension: {extension}}}]}}}}]"
        );
        let error = of(&kubeconfig(&yaml), None).unwrap_err();
        assert!(
            error.starts_with("context broken: its eru.mtsre.meitu.com extension") && error.contains(says),
            "{extension}: {error}"
        );
    }
}

#[test]
fn a_kubeconfig_without_contexts_names_no_cluster() {
    let found = of(&kubeconfig("apiVersion: v1\nkind: Config\n"), None).unwrap();
    assert_eq!(
        found,
        Contexts {
            clusters: vec![],
            without: vec![]
        }
    );
}
