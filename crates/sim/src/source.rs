//! Traffic sources and packet sizes. Each flow draws from its own ChaCha
//! stream (`seed`, stream = flow id), so the arrivals of an open-loop flow
//! do not depend on the other flows or on the algorithm.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::{PS_PER_SEC, SizeDist, SourceSpec};

/// Time to send `len` bytes at `bps`, in ps, rounded up (at least 1).
pub fn tx_ps(len: u32, bps: u64) -> u64 {
    let t = (u128::from(len) * 8 * u128::from(PS_PER_SEC)).div_ceil(u128::from(bps));
    u64::try_from(t).unwrap_or(u64::MAX).max(1)
}

/// Per-flow generator state.
#[derive(Debug, Clone)]
pub struct Gen {
    /// First, so that a draw touches it and the RNG's index together.
    sizes: Sizes,
    rng: ChaCha8Rng,
    kind: Kind,
}

/// A flow's packet sizes in the form drawing needs: small mixes inline (no
/// pointer to chase per packet), larger ones in two arrays.
#[derive(Debug, Clone)]
enum Sizes {
    Fixed(u32),
    Uniform(u32, u32),
    /// Up to four lengths and their cumulative weights.
    Mix4 {
        len: [u32; 4],
        cum: [u64; 4],
        n: usize,
    },
    Mix {
        len: Vec<u32>,
        cum: Vec<u64>,
    },
}

impl Sizes {
    fn new(size: &SizeDist) -> Sizes {
        match size {
            SizeDist::Fixed(l) => Sizes::Fixed(*l),
            SizeDist::Uniform(a, b) => Sizes::Uniform(*a, *b),
            SizeDist::Mix(v) => {
                let cum: Vec<u64> = v
                    .iter()
                    .scan(0u64, |s, x| {
                        *s += u64::from(x.1);
                        Some(*s)
                    })
                    .collect();
                let len: Vec<u32> = v.iter().map(|p| p.0).collect();
                if (1..=4).contains(&v.len()) {
                    let (mut l4, mut c4) = ([1u32; 4], [u64::MAX; 4]);
                    l4[..len.len()].copy_from_slice(&len);
                    c4[..cum.len()].copy_from_slice(&cum);
                    Sizes::Mix4 {
                        len: l4,
                        cum: c4,
                        n: v.len(),
                    }
                } else {
                    Sizes::Mix { len, cum }
                }
            }
        }
    }
}

/// The length whose cumulative weight first exceeds `x` (1 if none).
#[inline]
fn pick(len: &[u32], cum: &[u64], x: u64) -> u32 {
    let i = cum.partition_point(|&c| c <= x);
    len.get(i).copied().unwrap_or(1)
}

#[derive(Debug, Clone)]
enum Kind {
    Greedy,
    Cbr {
        bps: u64,
    },
    Poisson {
        mean_gap_ps: f64,
    },
    OnOff {
        bps: u64,
        on: f64,
        off: f64,
        exp: bool,
        on_end: u64,
    },
    Trace {
        rows: Vec<(u64, u32)>,
        next: usize,
    },
}

impl Gen {
    /// A generator for flow `flow` with `seed`.
    pub fn new(seed: u64, flow: u32, size: &SizeDist, src: &SourceSpec) -> Gen {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(u64::from(flow));
        let kind = match src {
            SourceSpec::Greedy => Kind::Greedy,
            SourceSpec::Cbr { rate } => Kind::Cbr { bps: rate.as_bps() },
            SourceSpec::Poisson { rate } => Kind::Poisson {
                mean_gap_ps: size.mean() * 8.0 * PS_PER_SEC as f64 / rate.as_bps() as f64,
            },
            SourceSpec::OnOff {
                rate,
                on_ps,
                off_ps,
                exponential,
            } => Kind::OnOff {
                bps: rate.as_bps(),
                on: *on_ps as f64,
                off: *off_ps as f64,
                exp: *exponential,
                on_end: 0,
            },
            SourceSpec::Trace(rows) => Kind::Trace {
                rows: rows.clone(),
                next: 0,
            },
        };
        Gen {
            sizes: Sizes::new(size),
            rng,
            kind,
        }
    }

    /// Whether this is a greedy source (driven by the engine, not by time).
    pub fn is_greedy(&self) -> bool {
        matches!(self.kind, Kind::Greedy)
    }

    /// Draws a packet length.
    #[inline]
    pub fn draw_len(&mut self) -> u32 {
        match &self.sizes {
            Sizes::Fixed(l) => *l,
            Sizes::Uniform(a, b) => self.rng.random_range(*a..=*b),
            Sizes::Mix4 { len, cum, n } => {
                let x = self.rng.random_range(0..cum[*n - 1]);
                pick(&len[..*n], &cum[..*n], x)
            }
            Sizes::Mix { len, cum } => {
                let total = cum.last().copied().unwrap_or(1);
                let x = self.rng.random_range(0..total);
                pick(len, cum, x)
            }
        }
    }

    fn exp(&mut self, mean: f64) -> u64 {
        let u: f64 = self.rng.random();
        (-(1.0 - u).ln() * mean).round() as u64
    }

    /// The first arrival `(time_ps, len)`, or `None` for greedy sources or
    /// an empty trace.
    pub fn first(&mut self) -> Option<(u64, u32)> {
        match &mut self.kind {
            Kind::Greedy => None,
            Kind::Cbr { .. } => Some((0, self.draw_len())),
            Kind::Poisson { mean_gap_ps } => {
                let m = *mean_gap_ps;
                let t = self.exp(m);
                Some((t, self.draw_len()))
            }
            Kind::OnOff { on, exp, .. } => {
                let (on, exp) = (*on, *exp);
                let d = if exp { self.exp(on).max(1) } else { on as u64 };
                if let Kind::OnOff { on_end, .. } = &mut self.kind {
                    *on_end = d;
                }
                Some((0, self.draw_len()))
            }
            Kind::Trace { rows, next } => {
                let r = rows.get(*next).copied();
                *next += 1;
                r
            }
        }
    }

    /// The arrival after one at `t` of `len` bytes.
    pub fn next(&mut self, t: u64, len: u32) -> Option<(u64, u32)> {
        match &mut self.kind {
            Kind::Greedy => None,
            Kind::Cbr { bps } => {
                let t2 = t.saturating_add(tx_ps(len, *bps));
                Some((t2, self.draw_len()))
            }
            Kind::Poisson { mean_gap_ps } => {
                let m = *mean_gap_ps;
                let t2 = t.saturating_add(self.exp(m));
                Some((t2, self.draw_len()))
            }
            Kind::OnOff {
                bps,
                on,
                off,
                exp,
                on_end,
            } => {
                let (on, off, exp, end) = (*on, *off, *exp, *on_end);
                let mut t2 = t.saturating_add(tx_ps(len, *bps));
                if t2 >= end {
                    let d_off = if exp { self.exp(off) } else { off as u64 };
                    let d_on = if exp { self.exp(on).max(1) } else { on as u64 };
                    t2 = end.saturating_add(d_off);
                    if let Kind::OnOff { on_end, .. } = &mut self.kind {
                        *on_end = t2.saturating_add(d_on);
                    }
                }
                Some((t2, self.draw_len()))
            }
            Kind::Trace { rows, next } => {
                let r = rows.get(*next).copied();
                *next += 1;
                r
            }
        }
    }
}

/// Lengths of a greedy flow drawn ahead, [`AHEAD`] at a time.
///
/// A greedy flow's generator draws nothing but lengths, so drawing several
/// at once keeps the sequence exactly the same while its large state (the
/// ChaCha block buffer, several cache lines) is touched once per batch
/// instead of once per packet; this small buffer is what the packet path
/// reads. (Open-loop flows interleave gaps and lengths on one stream, so
/// they draw one at a time.)
#[derive(Copy, Clone, Debug, Default)]
pub struct Ahead {
    len: [u32; AHEAD],
    used: u8,
}

/// Lengths an [`Ahead`] holds.
pub const AHEAD: usize = 7;

impl Ahead {
    /// An empty buffer (the first [`Ahead::next`] fills it).
    pub fn new() -> Ahead {
        Ahead {
            len: [0; AHEAD],
            used: AHEAD as u8,
        }
    }

    /// The next length of `g`'s sequence.
    #[inline]
    pub fn next(&mut self, g: &mut Gen) -> u32 {
        if usize::from(self.used) >= AHEAD {
            for l in &mut self.len {
                *l = g.draw_len();
            }
            self.used = 0;
        }
        let l = self.len[usize::from(self.used)];
        self.used += 1;
        l
    }
}

/// Parses a CSV trace `time_ns,flow,len` (an optional header line starting
/// with a letter and `#` comments are skipped). Returns
/// `(line, time_ns, flow, len)` rows, or `(line, message)`.
#[allow(clippy::type_complexity)]
pub fn parse_trace(text: &str) -> Result<Vec<(usize, u64, u32, u32)>, (usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let l = line.trim();
        if l.is_empty()
            || l.starts_with('#')
            || (n == 1 && l.starts_with(|c: char| c.is_ascii_alphabetic()))
        {
            continue;
        }
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 3 {
            return Err((
                n,
                format!("expected 3 fields `time_ns,flow,len`, found {}", f.len()),
            ));
        }
        let num = |s: &str, what: &str| -> Result<u64, (usize, String)> {
            s.parse::<u64>()
                .map_err(|_| (n, format!("{what} = `{s}` is not a non-negative integer")))
        };
        let t = num(f[0], "time_ns")?;
        let flow = num(f[1], "flow")?;
        let len = num(f[2], "len")?;
        let flow =
            u32::try_from(flow).map_err(|_| (n, format!("flow = {flow} is out of range")))?;
        let len = u32::try_from(len)
            .map_err(|_| (n, format!("len = {len} is out of range: allowed 1..=65536")))?;
        out.push((n, t, flow, len));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pktsched_core::Rate;

    #[test]
    fn lengths_drawn_ahead_are_the_same_sequence() {
        let size = SizeDist::Mix(vec![(64, 3), (576, 2), (1500, 1)]);
        let mut a = Gen::new(7, 3, &size, &SourceSpec::Greedy);
        let mut b = a.clone();
        let mut ah = Ahead::new();
        let direct: Vec<u32> = (0..100).map(|_| b.draw_len()).collect();
        let ahead: Vec<u32> = (0..100).map(|_| ah.next(&mut a)).collect();
        assert_eq!(direct, ahead);
        assert!(direct.contains(&64) && direct.contains(&576) && direct.contains(&1500));
    }

    #[test]
    fn cbr_spacing_is_exact() {
        let mut g = Gen::new(
            1,
            0,
            &SizeDist::Fixed(1250),
            &SourceSpec::Cbr {
                rate: Rate::mbit(10),
            },
        );
        let (t0, l) = g.first().unwrap_or((9, 9));
        assert_eq!((t0, l), (0, 1250));
        assert_eq!(g.next(t0, l), Some((1_000_000_000, 1250))); // 1 ms
    }

    #[test]
    fn mix_draws_only_listed_sizes_in_proportion() {
        let mut g = Gen::new(
            3,
            7,
            &SizeDist::Mix(vec![(64, 3), (1500, 1)]),
            &SourceSpec::Greedy,
        );
        let n = 40_000;
        let small = (0..n).filter(|_| g.draw_len() == 64).count();
        assert!((small as f64 / n as f64 - 0.75).abs() < 0.01, "{small}");
    }

    #[test]
    fn trace_parsing_reports_lines() {
        let rows = parse_trace("time_ns,flow,len\n0,0,100\n# c\n10,1,200\n").unwrap_or_default();
        assert_eq!(rows, vec![(2, 0, 0, 100), (4, 10, 1, 200)]);
        let e = parse_trace("0,0\n").err().map(|e| e.0);
        assert_eq!(e, Some(1));
        let e = parse_trace("0,0,100\n5,x,3\n").err();
        assert!(e.is_some_and(|(l, m)| l == 2 && m.contains("flow")));
    }
}
