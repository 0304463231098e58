//! The victim's targets counted run by run (issue #16: PSPAT's p99
//! within its bound and at most the locked baseline's in at least 4 of 5
//! runs). Runs of one index are measured back to back (`run` interleaves
//! the architectures), so PSPAT's run `i` is compared with the locked
//! baseline's run `i` at the same number of clients.

use serde::Serialize;

use super::RunRes;

/// How many of PSPAT's overload runs at one number of clients met each
/// victim target.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VictimTargets {
    /// PSPAT runs with a victim measured.
    pub runs: u64,
    /// Of them, p99 within the run's bound.
    pub in_bound: u64,
    /// PSPAT runs with a locked run of the same index to compare with.
    pub paired: u64,
    /// Of those, PSPAT's p99 at most the locked baseline's.
    pub le_locked: u64,
}

/// The counts for the overload runs at `clients` (`None` without a PSPAT
/// run that measured the victim).
pub(crate) fn victim_targets(runs: &[RunRes], clients: usize) -> Option<VictimTargets> {
    let of = |arch: &'static str| {
        runs.iter().filter(move |r| {
            r.phase == "overload" && r.arch == arch && r.clients == clients && r.victim.is_some()
        })
    };
    let mut t = VictimTargets::default();
    for p in of("pspat") {
        let Some(v) = &p.victim else { continue };
        t.runs += 1;
        t.in_bound += u64::from(v.p99_ns <= v.bound_ns);
        let locked = of("locked")
            .find(|l| l.run == p.run)
            .and_then(|l| l.victim.as_ref());
        if let Some(l) = locked {
            t.paired += 1;
            t.le_locked += u64::from(v.p99_ns <= l.p99_ns);
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
            RunRes {
                victim: None,
                ..run("pspat", 8, 3, 0, 0)
            },
        ];
        assert_eq!(
            victim_targets(&runs, 8),
            Some(VictimTargets {
                runs: 3,
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
}
