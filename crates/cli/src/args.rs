//! Checks of numeric options shared by the commands: every size a user
//! controls has a stated range, and an error names the option, the value
//! and what is allowed.

use anyhow::{Result, bail};

/// A whole number `min..=max` for `--flag`.
pub(crate) fn count(flag: &str, text: &str, min: u64, max: u64) -> Result<u64> {
    let t = text.trim();
    match t.parse::<u64>() {
        Ok(v) if (min..=max).contains(&v) => Ok(v),
        Ok(v) => bail!("--{flag} {v}: out of range: allowed {min}..={max}"),
        Err(_) => bail!("--{flag} {t:?}: not a whole number: allowed {min}..={max}"),
    }
}

/// A comma-separated list of whole numbers, each `min..=max`.
pub(crate) fn counts(flag: &str, text: &str, min: u64, max: u64) -> Result<Vec<u64>> {
    let v: Vec<u64> = text
        .split(',')
        .map(|s| count(flag, s, min, max))
        .collect::<Result<_>>()?;
    if v.is_empty() {
        bail!("--{flag} is empty: allowed a comma-separated list of {min}..={max}");
    }
    Ok(v)
}

/// `value` must lie in `min..=max`.
pub(crate) fn within(flag: &str, value: u64, min: u64, max: u64) -> Result<()> {
    if !(min..=max).contains(&value) {
        bail!("--{flag} {value}: out of range: allowed {min}..={max}");
    }
    Ok(())
}
