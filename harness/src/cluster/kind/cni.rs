//! Pod networking for a kind cluster made from the offline node image, which has no kindnetd:
//! after `kind create cluster` (with `disableDefaultCNI`), each node gets from outside, by
//! `docker exec`, what kindnetd would give it in-cluster (network policy aside) — [`commands`]:
//!
//! - `/etc/cni/net.d/10-bridge.conflist`: a bridge (`cni0`, the gateway, hairpin) with
//!   host-local addresses from the node's `spec.podCIDR`, and portmap (Debian's CNI plugins,
//!   linked under `/opt/cni/bin` in the image); containerd adds loopback itself;
//! - a route to every other node's pod range through that node's InternalIP;
//! - masquerade for pod traffic that leaves the pod network (pod to pod keeps its addresses),
//!   in a chain of its own in the node's nat table, with the iptables backend the node's
//!   entrypoint chose.

use serde_json::{Value, json};

/// The pod range of every kind cluster (kind's default `podSubnet`).
pub const POD_SUBNET: &str = "10.244.0.0/16";

/// The nat chain the masquerade rules go in.
pub const MASQUERADE_CHAIN: &str = "HARNESS-POD-MASQ";

/// Where the CNI configuration goes on a node.
pub const CONFLIST: &str = "/etc/cni/net.d/10-bridge.conflist";

/// What networking needs of one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeNet {
    /// The node's name (its container's name).
    pub name: String,
    /// Its `spec.podCIDR`.
    pub pod_cidr: String,
    /// Its InternalIP.
    pub ip: String,
}

/// The nodes of a `NodeList` (as JSON), each with its pod range and address; an error names a
/// node the controller manager has not given a pod range yet, or that has no InternalIP.
pub fn nodes(list: &Value) -> Result<Vec<NodeNet>, String> {
    let items = list["items"].as_array().cloned().unwrap_or_default();
    items
        .iter()
        .map(|n| {
            let name = n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let pod_cidr = n["spec"]["podCIDR"]
                .as_str()
                .ok_or_else(|| format!("node {name} has no spec.podCIDR yet"))?
                .to_string();
            let ip = n["status"]["addresses"]
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .find(|x| x["type"] == "InternalIP")
                        .and_then(|x| x["address"].as_str())
                })
                .ok_or_else(|| format!("node {name} has no InternalIP"))?
                .to_string();
            Ok(NodeNet { name, pod_cidr, ip })
        })
        .collect()
}

/// The CNI configuration of a node whose pod range is `pod_cidr`.
pub fn conflist(pod_cidr: &str) -> String {
    let c = json!({
        "cniVersion": "0.4.0",
        "name": "harness",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_cidr}]],
                    "routes": [{"dst": "0.0.0.0/0"}]
                }
            },
            {"type": "portmap", "capabilities": {"portMappings": true}}
        ]
    });
    serde_json::to_string_pretty(&c).expect("serializes")
}

/// The commands to run in `node` (each an argument list for `docker exec <node> ...`): the
/// configuration written atomically, the routes to the other nodes, the masquerade rules.
/// Running them again changes nothing.
pub fn commands(node: &NodeNet, all: &[NodeNet]) -> Vec<Vec<String>> {
    let sh = |script: String, args: &[&str]| -> Vec<String> {
        ["sh", "-c", &script, "sh"]
            .iter()
            .map(|s| s.to_string())
            .chain(args.iter().map(|s| s.to_string()))
            .collect()
    };
    let mut out = vec![sh(
        format!(
            "mkdir -p /etc/cni/net.d && printf '%s\\n' \"$1\" > {CONFLIST}.tmp && mv {CONFLIST}.tmp {CONFLIST}"
        ),
        &[&conflist(&node.pod_cidr)],
    )];
    for other in all.iter().filter(|o| o.name != node.name) {
        out.push(
            ["ip", "route", "replace", &other.pod_cidr, "via", &other.ip]
                .iter()
                .map(|s| s.to_string())
                .collect(),
        );
    }
    let (cidr, chain) = (&node.pod_cidr, MASQUERADE_CHAIN);
    out.push(sh(
        format!(
            "iptables -t nat -N {chain} 2>/dev/null || :; \
             iptables -t nat -C POSTROUTING -s {cidr} -j {chain} 2>/dev/null || \
             iptables -t nat -A POSTROUTING -s {cidr} -j {chain}; \
             iptables -t nat -F {chain} && \
             iptables -t nat -A {chain} -d {POD_SUBNET} -j RETURN && \
             iptables -t nat -A {chain} -j MASQUERADE"
        ),
        &[],
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> Value {
        json!({"items": [
            {"metadata": {"name": "c-control-plane"}, "spec": {"podCIDR": "10.244.0.0/24"},
             "status": {"addresses": [{"type": "Hostname", "address": "c-control-plane"},
                                      {"type": "InternalIP", "address": "172.30.0.2"}]}},
            {"metadata": {"name": "c-worker"}, "spec": {"podCIDR": "10.244.1.0/24"},
             "status": {"addresses": [{"type": "InternalIP", "address": "172.30.0.3"}]}}
        ]})
    }

    #[test]
    fn each_node_routes_to_the_others_and_masquerades_only_off_the_pod_network() {
        let nodes = nodes(&list()).unwrap();
        assert_eq!(nodes[1].ip, "172.30.0.3");
        let cmds = commands(&nodes[0], &nodes);
        assert_eq!(cmds.len(), 3, "{cmds:?}");
        // The configuration is the script's argument, not part of the script.
        assert_eq!(&cmds[0][..2], ["sh", "-c"]);
        let conf: Value = serde_json::from_str(&cmds[0][4]).unwrap();
        assert_eq!(
            conf["plugins"][0]["ipam"]["ranges"][0][0]["subnet"],
            "10.244.0.0/24"
        );
        assert!(cmds[0][2].contains("mv /etc/cni/net.d/10-bridge.conflist.tmp"));
        assert_eq!(
            cmds[1],
            [
                "ip",
                "route",
                "replace",
                "10.244.1.0/24",
                "via",
                "172.30.0.3"
            ]
        );
        assert!(cmds[2][2].contains("-s 10.244.0.0/24 -j HARNESS-POD-MASQ"));
        assert!(cmds[2][2].contains("-d 10.244.0.0/16 -j RETURN"));
    }

    #[test]
    fn a_node_without_a_pod_range_is_named() {
        let mut l = list();
        l["items"][1]["spec"] = json!({});
        assert_eq!(
            nodes(&l).unwrap_err(),
            "node c-worker has no spec.podCIDR yet"
        );
    }
}
