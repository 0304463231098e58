//! The route config as TOML gives it, every field with its position.

use serde::Deserialize;
use toml::Spanned;

use crate::config::{RawControl, RawMatch};

/// A whole `pktsched route` config file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouteConfig {
    pub(crate) router: Spanned<RawRouter>,
    pub(crate) class: Option<Spanned<Vec<Spanned<RawRouteClass>>>>,
    pub(crate) route: Option<Vec<Spanned<RawRoute>>>,
    pub(crate) neighbour: Option<Vec<Spanned<RawNeighbour>>>,
    pub(crate) control: Option<RawControl>,
    pub(crate) egress: Option<Spanned<super::egress_config::RawEgress>>,
}

/// `[router]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouter {
    pub(crate) ingress: Spanned<String>,
    pub(crate) egress: Spanned<String>,
    pub(crate) backend: Option<Spanned<String>>,
    pub(crate) strategy: Option<Spanned<String>>,
    pub(crate) device_budget: Option<Spanned<i64>>,
    pub(crate) ring_frames: Option<Spanned<i64>>,
    pub(crate) pool_frames: Option<Spanned<i64>>,
    pub(crate) cost: Option<Spanned<String>>,
    pub(crate) busy_poll: Option<Spanned<i64>>,
    pub(crate) ingress_address: Option<Spanned<String>>,
    pub(crate) egress_address: Option<Spanned<String>>,
    pub(crate) ingress_address6: Option<Spanned<String>>,
    pub(crate) egress_address6: Option<Spanned<String>>,
}

/// One `[[class]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouteClass {
    pub(crate) name: Spanned<String>,
    pub(crate) budget: Option<Spanned<i64>>,
    #[serde(rename = "match")]
    pub(crate) matches: Option<Spanned<Vec<Spanned<RawMatch>>>>,
}

/// One `[[route]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRoute {
    pub(crate) prefix: Spanned<String>,
    pub(crate) via: Option<Spanned<String>>,
    pub(crate) dev: Spanned<String>,
}

/// One `[[neighbour]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawNeighbour {
    pub(crate) ip: Spanned<String>,
    pub(crate) mac: Spanned<String>,
}
