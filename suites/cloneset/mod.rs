//! CloneSet (`apps.kruise.io/v1alpha1`): its claims recreated with its pods when the image and
//! `volumeClaimTemplates` change together (S2, [`claims`]), and its documented lifecycle —
//! scaling, update strategies, hooks, revision history, PVCs, conditions ([`lifecycle`]); what
//! a served API version's schema offers kept when set through it ([`versions`]).
//! Start with [`scenarios`].

pub mod claims;
pub mod lifecycle;
pub mod versions;

use crate::scenario::Scenario;

/// The scenarios of this suite.
pub fn scenarios() -> Vec<Scenario> {
    let mut v = claims::scenarios();
    v.extend(lifecycle::scenarios());
    v.extend(versions::scenarios());
    v
}
