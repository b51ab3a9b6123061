//! SidecarSet (`apps.kruise.io/v1alpha1`): in-place updates of pods with an injected sidecar
//! under InPlacePodVerticalScaling (S3, [`in_place`]), its update and selection lifecycle
//! ([`lifecycle`]) and what it injects ([`injection`]). Start with [`scenarios`].

pub mod in_place;
pub mod injection;
pub mod lifecycle;

use crate::scenario::Scenario;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = in_place::scenarios();
    v.extend(lifecycle::scenarios());
    v.extend(injection::scenarios());
    v
}
