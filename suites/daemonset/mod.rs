//! Advanced DaemonSet (`apps.kruise.io/v1alpha1`): selector immutability beside CloneSet and a
//! native Deployment (S5, [`selector`]), its documented lifecycle ([`lifecycle`]), and what
//! its webhook admits ([`validation`]). Start with [`scenarios`].

pub mod lifecycle;
pub mod selector;
pub mod validation;

use crate::scenario::Scenario;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = selector::scenarios();
    v.extend(lifecycle::scenarios());
    v.extend(validation::scenarios());
    v
}
