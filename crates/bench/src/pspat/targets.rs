//! The victim's targets counted run by run (issue #16: PSPAT's p99
//! within its bound and at most the locked baseline's in at least 4 of 5
//! runs). Runs of one index are measured back to back (`run` interleaves
//! the architectures), so PSPAT's run `i` is compared with the locked
//! baseline's run `i` at the same number of clients.

use serde::Serialize;

use super::RunRes;

/// How many of PSPAT's overload runs at one number of clients met each
/// victim target. A run whose victim got no packet out in the measured
/// window (starved: no percentiles) fails both targets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VictimTargets {
    /// PSPAT overload runs, starved ones included.
    pub runs: u64,
    /// Of them, runs whose victim was starved (counted as failures).
    pub starved: u64,
    /// Of them, p99 within the run's bound.
    pub in_bound: u64,
    /// PSPAT runs with a locked run of the same index to compare with.
    pub paired: u64,
    /// Of those, PSPAT's p99 at most the locked baseline's (a starved
    /// locked victim counts as an unbounded p99, a starved PSPAT one
    /// always fails).
    pub le_locked: u64,
}

/// The counts for the overload runs at `clients` (`None` without a PSPAT
/// overload run).
pub(crate) fn victim_targets(runs: &[RunRes], clients: usize) -> Option<VictimTargets> {
    let of = |arch: &'static str| {
        runs.iter()
            .filter(move |r| r.phase == "overload" && r.arch == arch && r.clients == clients)
    };
    let mut t = VictimTargets::default();
    for p in of("pspat") {
        t.runs += 1;
        let locked = of("locked").find(|l| l.run == p.run);
        t.paired += u64::from(locked.is_some());
        let Some(v) = &p.victim else {
            t.starved += 1;
            continue;
        };
        t.in_bound += u64::from(v.p99_ns <= v.bound_ns);
        if let Some(l) = locked {
            let le = l.victim.as_ref().is_none_or(|l| v.p99_ns <= l.p99_ns);
            t.le_locked += u64::from(le);
        }
    }
    (t.runs > 0).then_some(t)
}

#[cfg(test)]
mod tests {
    use super::{VictimTargets, victim_targets};
    use crate::pspat::{RunRes, Victim};

    fn run(arch: &str, clients: usize, run: usize, p99_ns: u64, bound_ns: u64) -> RunRes {
        RunRes {
            phase: "overload".into(),
            arch: arch.into(),
            clients,
            run,
            victim: Some(Victim {
                p99_ns,
                bound_ns,
                ..Victim::default()
            }),
            ..RunRes::default()
        }
    }

    #[test]
    fn runs_are_compared_with_the_locked_run_of_the_same_index() {
        let runs = vec![
            run("pspat", 8, 0, 10, 12),
            run("locked", 8, 0, 11, 12),
            run("pspat", 8, 1, 13, 12),
            run("locked", 8, 1, 5, 12),
            run("pspat", 8, 2, 4, 12),
            // No locked run 2; another client count's runs are ignored.
            run("locked", 1, 2, 1, 12),
            run("pspat", 1, 0, 1, 12),
        ];
        assert_eq!(
            victim_targets(&runs, 8),
            Some(VictimTargets {
                runs: 3,
                starved: 0,
                in_bound: 2,
                paired: 2,
                le_locked: 1,
            })
        );
        // A tie counts as at most the locked one's.
        let tie = vec![run("pspat", 1, 0, 7, 6), run("locked", 1, 0, 7, 6)];
        assert_eq!(
            victim_targets(&tie, 1),
            Some(VictimTargets {
                runs: 1,
                starved: 0,
                in_bound: 0,
                paired: 1,
                le_locked: 1,
            })
        );
        assert_eq!(victim_targets(&runs, 64), None);
        let throughput = vec![RunRes {
            phase: "throughput".into(),
            ..run("pspat", 8, 0, 1, 2)
        }];
        assert_eq!(victim_targets(&throughput, 8), None);
    }

    #[test]
    fn a_starved_victim_fails_both_targets() {
        let starved = |arch: &str, run_ix: usize| RunRes {
            victim: None,
            ..run(arch, 8, run_ix, 0, 0)
        };
        let runs = vec![
            // PSPAT starved next to a locked run that was not: fails both
            // (its p99 is not 0).
            starved("pspat", 0),
            run("locked", 8, 0, 50, 12),
            // Both starved: still a failure for PSPAT.
            starved("pspat", 1),
            starved("locked", 1),
            // PSPAT measured, locked starved: at most locked's (unbounded).
            run("pspat", 8, 2, 10, 12),
            starved("locked", 2),
            // Starved without a locked run to compare with.
            starved("pspat", 3),
        ];
        assert_eq!(
            victim_targets(&runs, 8),
            Some(VictimTargets {
                runs: 4,
                starved: 3,
                in_bound: 1,
                paired: 3,
                le_locked: 1,
            })
        );
    }
}
