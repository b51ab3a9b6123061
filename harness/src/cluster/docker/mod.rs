//! Docker for the providers that need it (kind). [`runtime`] is the OCI runtime a Docker
//! daemon of the harness's own runs containers with: runc, minus the capabilities runc cannot
//! grant where the capability bounding set lacks some.

pub mod runtime;
