//! Shared by the pipeline and real-wire tests: every scenario runs once
//! per engine.

/// Each scenario once per engine.
macro_rules! for_both_engines {
    ($($scenario:ident),* $(,)?) => {
        mod run_to_completion {
            $(#[test]
            fn $scenario() {
                super::$scenario(super::Engine::RunToCompletion);
            })*
        }
        mod pspat {
            $(#[test]
            fn $scenario() {
                super::$scenario(super::Engine::Pspat);
            })*
        }
    };
}
