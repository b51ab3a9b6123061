//! Which suite runs and on what cluster: [`Choice`] is where to start (the suite's release and
//! the Kubernetes it runs on), with the kind cluster upstream's CI brings up for it
//! ([`kind_layout`]), the feature gates its CI sets ([`ci_gates`]) and the suite itself
//! ([`e2e_suite`]).

use super::{UpstreamSuite, plan};
use crate::controller::{CiGates, ControllerRef, E2eSuite};
use crate::run::Plan;
use crate::toolchain::KubeVersion;

/// Which upstream suite a run, matrix or qualification runs on its cells
/// (`--upstream-e2e`, `--upstream-e2e-from`): each cell's own release's, or one release's
/// everywhere.
#[derive(Debug, Clone, Default)]
pub struct Choice {
    /// One release's suite for every cell; `None` runs each cell's own.
    pub from: Option<ControllerRef>,
    /// Ginkgo focus regexes.
    pub focus: Vec<String>,
    /// Ginkgo skip regexes.
    pub skip: Vec<String>,
    /// Real nodes as the cell's only workers (`--upstream-real-nodes`); 0 for kwok nodes.
    pub real_nodes: usize,
    /// Parallel Ginkgo processes (`--upstream-procs`; 0 counts as 1).
    pub procs: usize,
}

/// The name of upstream CI's kind cluster, whose workers (`ci-testing-worker`,
/// `ci-testing-worker2`, ...) some specs name.
pub const KIND_CLUSTER: &str = "ci-testing";

/// How many workers upstream's CI clusters have (`test/kind-conf*.yaml`: a control plane and
/// three workers); a cell of fake nodes has as many.
pub const KIND_WORKERS: usize = 3;

/// Gives `profile` the workers of upstream's kind cluster, named as kind names them (specs
/// count them, and some name the first): `real_nodes` real ones, untainted, and no fake node;
/// or, with none, [`KIND_WORKERS`] fake ones without the scenario layout's zones.
pub fn kind_layout(
    profile: &mut crate::cluster::Profile,
    real_nodes: usize,
) -> Result<(), crate::cluster::ProfileError> {
    if real_nodes > 0 {
        return profile.only_real_nodes(&kind_workers(real_nodes));
    }
    profile.nodes = kind_workers(KIND_WORKERS)
        .into_iter()
        .map(|name| crate::cluster::NodeSpec {
            name,
            labels: Default::default(),
        })
        .collect();
    Ok(())
}

/// The names kind gives the `count` workers of cluster [`KIND_CLUSTER`].
pub fn kind_workers(count: usize) -> Vec<String> {
    (1..=count)
        .map(|i| match i {
            1 => format!("{KIND_CLUSTER}-worker"),
            i => format!("{KIND_CLUSTER}-worker{i}"),
        })
        .collect()
}

impl Choice {
    /// The suite a cell with `controller` runs.
    pub fn suite(&self, controller: &ControllerRef) -> UpstreamSuite {
        UpstreamSuite {
            from: self.from.clone().unwrap_or_else(|| controller.clone()),
            focus: self.focus.clone(),
            skip: self.skip.clone(),
            procs: self.procs.max(1),
        }
    }

    /// The plan of the cell (`kubernetes`, `controller`), prepared as upstream's CI prepares
    /// its cluster: the suite's e2e configuration, its CSI StorageClasses and the cluster's
    /// feature gates read from its release module, the manager's gates from the manager's
    /// (see [`ci_gates`]).
    pub async fn plan(
        &self,
        kubernetes: KubeVersion,
        controller: &ControllerRef,
        toolchain: &crate::toolchain::Toolchain,
    ) -> anyhow::Result<Plan> {
        let suite = self.suite(controller);
        let objects = e2e_suite(&suite.from)?.seed_objects().await?;
        let gates = ci_gates(kubernetes, controller, &suite.from, toolchain).await?;
        let mut p = plan(kubernetes, controller, suite, objects);
        p.clusters[0].profile.feature_gates = gates.cluster;
        p.clusters[0].controller_gates = gates.controller;
        kind_layout(&mut p.clusters[0].profile, self.real_nodes)?;
        Ok(p)
    }
}

/// The gates upstream's CI runs `suite` and `controller` with ([`E2eSuite::ci_gates`]): the
/// controller's as its release's manifest sets them (the harness still sets the gates that
/// follow the cell's nodes), and of the cluster's the ones this Kubernetes version has off by
/// default (InPlacePodVerticalScaling on 1.27 to 1.32), read from its apiserver's `--help`: a
/// gate the version lacks or has on already is left as it is.
pub async fn ci_gates(
    kubernetes: KubeVersion,
    controller: &ControllerRef,
    suite: &ControllerRef,
    toolchain: &crate::toolchain::Toolchain,
) -> anyhow::Result<CiGates> {
    let mut gates = e2e_suite(suite)?.ci_gates(controller).await?;
    if !gates.cluster.is_empty() {
        let apiserver = toolchain
            .kubernetes(kubernetes)
            .await?
            .path("kube-apiserver");
        let help = crate::toolchain::help_text(&apiserver)
            .await
            .map_err(|e| anyhow::anyhow!("run {} --help: {e}", apiserver.display()))?;
        gates.cluster = crate::toolchain::off_by_default(&help, &gates.cluster);
    }
    Ok(gates)
}

/// The own suite of `reference`, or an error saying it ships none the harness can run.
pub fn e2e_suite(reference: &ControllerRef) -> anyhow::Result<Box<dyn E2eSuite>> {
    reference.controller().e2e_suite().ok_or_else(|| {
        anyhow::anyhow!(
            "{reference} ships no end-to-end suite the harness can run; drop --upstream-e2e"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_suite_cluster_has_kind_s_three_workers_or_only_its_real_nodes_untainted() {
        assert_eq!(
            kind_workers(3),
            [
                "ci-testing-worker",
                "ci-testing-worker2",
                "ci-testing-worker3"
            ]
        );
        let suite = Choice::default().suite(&"openkruise@v1.9.0".parse().unwrap());
        let mut p = plan(
            "1.32".parse().unwrap(),
            &"openkruise@v1.9.0".parse().unwrap(),
            suite,
            vec![],
        );
        let profile = &mut p.clusters[0].profile;
        assert!(!profile.nodes.is_empty() && profile.real_node_taint);
        let mut fake = profile.clone();
        profile.only_real_nodes(&kind_workers(2)).unwrap();
        assert!(profile.nodes.is_empty() && !profile.real_node_taint);
        assert_eq!(profile.real_nodes[1].name, "ci-testing-worker2");
        assert!(profile.only_real_nodes(&[]).is_err());
        let mut real = fake.clone();
        kind_layout(&mut real, 3).unwrap();
        assert_eq!(real.real_nodes.len(), 3);
        assert!(real.nodes.is_empty());
        // Without real nodes: kind's three workers as fake nodes, no zones.
        kind_layout(&mut fake, 0).unwrap();
        let names: Vec<&str> = fake.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, kind_workers(KIND_WORKERS));
        assert!(fake.nodes.iter().all(|n| n.labels.is_empty()) && fake.real_nodes.is_empty());
    }
}
