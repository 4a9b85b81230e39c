//! Which instrumentation the pass emits (`enum kage_instrumentation` of docs/abi.md), chosen
//! at build time from the environment of the compiler process.

use std::sync::Once;

/// The environment variable naming the tool the program is built for.
pub const TOOL_VARIABLE: &str = "KAGE_TOOL";
/// With `KAGE_TOOL=working-set`, `1` selects the test-only trace mode.
pub const TRACE_VARIABLE: &str = "KAGE_WS_TRACE";
/// With `KAGE_TOOL=working-set`: the cache line size built into the marks, in bytes.
pub const LINE_SIZE_VARIABLE: &str = "KAGE_WS_LINE_SIZE";
/// The line size when [`LINE_SIZE_VARIABLE`] is unset or empty.
pub const DEFAULT_LINE_SIZE: u64 = 64;

/// The line size a `KAGE_WS_LINE_SIZE` value asks for (`None`: unset): a power of two from
/// 16 to 4096, as the runtime's `line_size=`.
pub fn line_size_from_setting(value: Option<&str>) -> Result<u64, String> {
    match value.unwrap_or("") {
        "" => Ok(DEFAULT_LINE_SIZE),
        v => match v.parse::<u64>() {
            Ok(n) if n.is_power_of_two() && (16..=4096).contains(&n) => Ok(n),
            _ => Err(format!(
                "kage-pass: {LINE_SIZE_VARIABLE}='{v}' is not a power of two from 16 to 4096; \
                 building for {DEFAULT_LINE_SIZE}-byte lines"
            )),
        },
    }
}

/// The line size the environment asks for; an invalid value falls back to the default with
/// one warning per process (the wrapper rejects it earlier; this is a fallback).
pub fn line_size_from_environment() -> u64 {
    let value = std::env::var_os(LINE_SIZE_VARIABLE).map(|v| v.to_string_lossy().into_owned());
    line_size_from_setting(value.as_deref()).unwrap_or_else(|warning| {
        static WARN_ONCE: Once = Once::new();
        WARN_ONCE.call_once(|| eprintln!("{warning}"));
        DEFAULT_LINE_SIZE
    })
}

/// `enum kage_instrumentation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instrumentation {
    /// Region hooks and a call per access: works with every runtime tool.
    Calls = 0,
    /// Inline working-set marking, budget checks per segment.
    WorkingSet = 1,
    /// As `WorkingSet`, plus a `__kage_ws_trace` call before every access (tests only).
    WorkingSetTrace = 2,
    /// As `Calls`, but simple counted innermost loops report their accesses per chunk of
    /// iterations (`__kage_fp_strided`) and enter their region on the first iteration only:
    /// the footprint tool.
    Footprint = 3,
}

impl Instrumentation {
    /// The mode for the values of `KAGE_TOOL` and `KAGE_WS_TRACE` (`None`: unset), and the
    /// warning to print when `KAGE_TOOL` names nothing the pass knows.
    pub fn from_settings(tool: Option<&str>, trace: Option<&str>) -> (Self, Option<String>) {
        match tool.unwrap_or("") {
            "" | "count" => (Instrumentation::Calls, None),
            "footprint" => (Instrumentation::Footprint, None),
            "working-set" if trace == Some("1") => (Instrumentation::WorkingSetTrace, None),
            "working-set" => (Instrumentation::WorkingSet, None),
            other => (
                Instrumentation::Calls,
                Some(format!(
                    "kage-pass: unknown {TOOL_VARIABLE} '{other}'; instrumenting for every tool"
                )),
            ),
        }
    }

    /// The mode the environment asks for. An unknown tool falls back to `Calls` with one
    /// warning per process (the wrapper rejects unknown tools earlier; this is a fallback).
    pub fn from_environment() -> Self {
        let read = |name| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
        let (tool, trace) = (read(TOOL_VARIABLE), read(TRACE_VARIABLE));
        let (mode, warning) = Self::from_settings(tool.as_deref(), trace.as_deref());
        if let Some(warning) = warning {
            static WARN_ONCE: Once = Once::new();
            WARN_ONCE.call_once(|| eprintln!("{warning}"));
        }
        mode
    }

    /// The value of `kage_module.instrumentation`.
    pub fn abi_value(self) -> u32 {
        self as u32
    }

    /// Whether accesses are marked inline (modes 1 and 2) rather than reported by calls.
    pub fn is_working_set(self) -> bool {
        matches!(
            self,
            Instrumentation::WorkingSet | Instrumentation::WorkingSetTrace
        )
    }

    /// Whether every access also calls `__kage_ws_trace` (mode 2).
    pub fn traces(self) -> bool {
        self == Instrumentation::WorkingSetTrace
    }
}

#[cfg(test)]
mod tests {
    use super::Instrumentation::{self, *};

    fn mode(tool: Option<&str>, trace: Option<&str>) -> Instrumentation {
        let (mode, warning) = Instrumentation::from_settings(tool, trace);
        assert!(warning.is_none(), "{warning:?}");
        mode
    }

    #[test]
    fn unset_empty_and_count_select_calls_and_footprint_its_own() {
        assert_eq!(mode(None, None), Calls);
        assert_eq!(mode(Some(""), None), Calls);
        assert_eq!(mode(Some("count"), None), Calls);
        assert_eq!(mode(Some("footprint"), None), Footprint);
        assert_eq!(Footprint.abi_value(), 3);
        assert!(!Footprint.is_working_set() && !Footprint.traces());
        // The trace switch only means something for the working-set tool.
        assert_eq!(mode(Some("count"), Some("1")), Calls);
        assert_eq!(mode(None, Some("1")), Calls);
    }

    #[test]
    fn working_set_with_and_without_trace() {
        assert_eq!(mode(Some("working-set"), None), WorkingSet);
        assert_eq!(mode(Some("working-set"), Some("0")), WorkingSet);
        assert_eq!(mode(Some("working-set"), Some("")), WorkingSet);
        assert_eq!(mode(Some("working-set"), Some("1")), WorkingSetTrace);
        assert_eq!(WorkingSet.abi_value(), 1);
        assert_eq!(WorkingSetTrace.abi_value(), 2);
        assert!(WorkingSetTrace.traces() && !WorkingSet.traces());
    }

    #[test]
    fn line_sizes() {
        use super::line_size_from_setting as size;
        assert_eq!(size(None), Ok(64));
        assert_eq!(size(Some("")), Ok(64));
        assert_eq!(size(Some("16")), Ok(16));
        assert_eq!(size(Some("4096")), Ok(4096));
        for bad in ["8", "48", "8192", "sixty-four", "-64"] {
            let e = size(Some(bad)).unwrap_err();
            assert!(e.contains(&format!("KAGE_WS_LINE_SIZE='{bad}'")), "{e}");
        }
    }

    #[test]
    fn unknown_tool_falls_back_to_calls_with_a_warning() {
        let (mode, warning) = Instrumentation::from_settings(Some("workingset"), Some("1"));
        assert_eq!(mode, Calls);
        assert_eq!(
            warning.as_deref(),
            Some("kage-pass: unknown KAGE_TOOL 'workingset'; instrumenting for every tool")
        );
    }
}
