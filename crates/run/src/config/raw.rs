//! The config file as TOML gives it: every field keeps its position so an
//! error can point at it.

use serde::Deserialize;
use toml::Spanned;

/// A whole config file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    pub(crate) link: Spanned<RawLink>,
    pub(crate) scheduler: Option<Spanned<RawScheduler>>,
    pub(crate) control: Option<RawControl>,
    pub(crate) class: Option<Spanned<Vec<Spanned<RawClass>>>>,
}

/// `[link]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLink {
    pub(crate) ingress: Spanned<String>,
    pub(crate) egress: Spanned<String>,
    pub(crate) rate: Spanned<RateText>,
    pub(crate) overhead: Option<Spanned<i64>>,
    pub(crate) mpu: Option<Spanned<i64>>,
    pub(crate) max_frame: Option<Spanned<i64>>,
    pub(crate) backend: Option<Spanned<String>>,
    pub(crate) promiscuous: Option<bool>,
    pub(crate) buffers: Option<Spanned<i64>>,
    pub(crate) burst: Option<Spanned<i64>>,
    pub(crate) prio_burst: Option<Spanned<i64>>,
    pub(crate) engine: Option<Spanned<String>>,
    pub(crate) cpu: Option<Spanned<i64>>,
    pub(crate) sched: Option<Spanned<String>>,
    pub(crate) busy_poll: Option<Spanned<BoolOrNum>>,
}

/// `true`/`false` or a number (`link.busy_poll`: on, off, or a budget).
#[derive(Debug)]
pub(crate) enum BoolOrNum {
    Bool(bool),
    Num(i64),
}

/// What `link.busy_poll` takes, for serde's "invalid type" message.
const BOOL_OR_NUM_EXPECTED: &str =
    "true, false or a whole number (link.busy_poll: a budget of 1..=1024 frames)";

impl<'de> Deserialize<'de> for BoolOrNum {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BoolOrNum, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = BoolOrNum;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(BOOL_OR_NUM_EXPECTED)
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<BoolOrNum, E> {
                Ok(BoolOrNum::Bool(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<BoolOrNum, E> {
                Ok(BoolOrNum::Num(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<BoolOrNum, E> {
                // Beyond i64 is beyond every range: kept saturated so the
                // range check names it.
                Ok(BoolOrNum::Num(i64::try_from(v).unwrap_or(i64::MAX)))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A rate as written: a string with its unit. A bare number is refused by
/// name (bits or bytes per second? `10` could be either).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RateText(pub(crate) String);

/// What a rate field takes, for serde's "invalid type" message.
pub(crate) const RATE_EXPECTED: &str = "a rate with its unit, as a string: \"100mbit\", \"1.5gbit\", \
     \"125MB/s\" (bits: bit, kbit, mbit, gbit, tbit; bytes: B/s, kB/s, MB/s, GB/s; a bare \
     number is ambiguous)";

impl std::ops::Deref for RateText {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for RateText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RateText, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RateText;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(RATE_EXPECTED)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<RateText, E> {
                Ok(RateText(v.to_string()))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// `[scheduler]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScheduler {
    pub(crate) algorithm: Option<Spanned<String>>,
    pub(crate) policy: Option<Spanned<String>>,
}

/// `[control]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawControl {
    pub(crate) socket: Option<Spanned<String>>,
    pub(crate) prometheus: Option<Spanned<String>>,
}

/// One `[[class]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawClass {
    pub(crate) name: Spanned<String>,
    pub(crate) weight: Option<Spanned<i64>>,
    pub(crate) prio: Option<Spanned<i64>>,
    pub(crate) limit: Option<Spanned<i64>>,
    pub(crate) rate: Option<Spanned<RateText>>,
    pub(crate) ceil: Option<Spanned<RateText>>,
    pub(crate) burst: Option<Spanned<NumOrText>>,
    pub(crate) cburst: Option<Spanned<NumOrText>>,
    pub(crate) node: Option<Spanned<String>>,
    pub(crate) default: Option<Spanned<bool>>,
    #[serde(rename = "match")]
    pub(crate) matches: Option<Spanned<Vec<Spanned<RawMatch>>>>,
}

/// A number or a string (ports: `80` or `"1000-2000"`; DSCP: `46` or `"ef"`).
#[derive(Debug)]
pub(crate) enum NumOrText {
    Num(i64),
    Text(String),
}

/// What a [`NumOrText`] field takes, for serde's "invalid type" message.
pub(crate) const NUM_OR_TEXT_EXPECTED: &str = "a whole number or a string (ports: 80 or \"1000-2000\"; \
     dscp: 46 or \"ef\"; proto: 17 or \"udp\"; burst: 15360 or \"15k\")";

impl<'de> Deserialize<'de> for NumOrText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<NumOrText, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = NumOrText;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(NUM_OR_TEXT_EXPECTED)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<NumOrText, E> {
                Ok(NumOrText::Num(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<NumOrText, E> {
                Ok(NumOrText::Num(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<NumOrText, E> {
                Ok(NumOrText::Text(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl std::fmt::Display for NumOrText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NumOrText::Num(n) => write!(f, "{n}"),
            NumOrText::Text(s) => write!(f, "{s:?}"),
        }
    }
}

/// One match rule of a class: every field given must match.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMatch {
    pub(crate) src: Option<Spanned<String>>,
    pub(crate) dst: Option<Spanned<String>>,
    pub(crate) proto: Option<Spanned<NumOrText>>,
    pub(crate) sport: Option<Spanned<NumOrText>>,
    pub(crate) dport: Option<Spanned<NumOrText>>,
    pub(crate) dscp: Option<Spanned<NumOrText>>,
    pub(crate) vlan: Option<Spanned<i64>>,
}
