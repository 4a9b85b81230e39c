//! Shared helpers for the integration tests: locate the built plugin, run `opt-22` with it,
//! and read back the parts of the output the tests check.
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The `libkage_pass.so` cargo built for this test run. `cargo test` builds the cdylib into
/// `<target>/<profile>/deps/` (beside the test executable) without copying it up to
/// `<target>/<profile>/`, where `cargo build` puts it; take the newer of the two so a stale
/// plugin is never tested. Works for any `CARGO_TARGET_DIR` and profile.
pub fn plugin_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps_dir = exe.parent().expect("<target>/<profile>/deps");
    let profile_dir = deps_dir.parent().expect("<target>/<profile>");
    let candidates = [
        deps_dir.join("libkage_pass.so"),
        profile_dir.join("libkage_pass.so"),
    ];
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    candidates
        .iter()
        .filter_map(|p| modified(p).map(|time| (time, p.clone())))
        .max()
        .map(|(_, path)| path)
        .unwrap_or_else(|| {
            panic!(
                "libkage_pass.so not found in {} or {}",
                deps_dir.display(),
                profile_dir.display()
            )
        })
}

/// `tests/ir/` at the repository root.
pub fn ir_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/ir")
}

/// The environment the pass reads (`KAGE_TOOL`, `KAGE_WS_TRACE`, `KAGE_WS_LINE_SIZE`, left
/// unset: 64-byte lines) for one mode; set on the
/// child process only, never in the test process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `KAGE_TOOL=count-calls`: `instrumentation` 0.
    Calls,
    /// `KAGE_TOOL=working-set`: 1.
    WorkingSet,
    /// `KAGE_TOOL=working-set KAGE_WS_TRACE=1`: 2.
    WorkingSetTrace,
    /// `KAGE_TOOL=footprint`: 3.
    Footprint,
    /// Neither variable set (`count`): 9.
    Counts,
}

impl Mode {
    /// `kage_module.instrumentation` for this mode.
    pub fn abi_value(self) -> u32 {
        match self {
            Mode::Calls => 0,
            Mode::WorkingSet => 1,
            Mode::WorkingSetTrace => 2,
            Mode::Footprint => 3,
            Mode::Counts => 9,
        }
    }

    /// Sets (or clears) the pass's variables on `cmd`, whatever the test process has.
    pub fn apply(self, cmd: &mut Command) {
        cmd.env_remove("KAGE_TOOL")
            .env_remove("KAGE_WS_TRACE")
            .env_remove("KAGE_WS_LINE_SIZE")
            .env_remove("KAGE_INLINED_REGIONS");
        match self {
            Mode::Counts => {}
            Mode::Calls => {
                cmd.env("KAGE_TOOL", "count-calls");
            }
            Mode::Footprint => {
                cmd.env("KAGE_TOOL", "footprint");
            }
            Mode::WorkingSet | Mode::WorkingSetTrace => {
                cmd.env("KAGE_TOOL", "working-set");
            }
        }
        if self == Mode::WorkingSetTrace {
            cmd.env("KAGE_WS_TRACE", "1");
        }
    }
}

/// Runs `opt-22 [-load-pass-plugin=...] -passes=<passes> -S` on `tests/ir/<name>` through
/// stdin (so the output does not contain the file's path), asserting success; opt verifies
/// the module before printing it.
pub fn run_opt(name: &str, passes: Option<&str>) -> String {
    run_opt_in(Mode::Calls, name, passes)
}

/// [`run_opt`] with the environment of `mode`.
pub fn run_opt_in(mode: Mode, name: &str, passes: Option<&str>) -> String {
    let output = run_opt_with(mode, &[], name, passes);
    String::from_utf8(output.stdout).expect("opt output is UTF-8")
}

/// [`run_opt_in`] with more variables in the environment (after the mode's), returning
/// stdout and stderr.
pub fn run_opt_with(
    mode: Mode,
    env: &[(&str, &str)],
    name: &str,
    passes: Option<&str>,
) -> std::process::Output {
    let input =
        std::fs::File::open(ir_dir().join(name)).unwrap_or_else(|e| panic!("open {name}: {e}"));
    let mut cmd = Command::new("opt-22");
    mode.apply(&mut cmd);
    cmd.envs(env.iter().copied());
    if let Some(passes) = passes {
        cmd.arg(format!("-load-pass-plugin={}", plugin_path().display()))
            .arg(format!("-passes={passes}"));
    } else {
        cmd.arg("-passes=verify");
    }
    let output = cmd
        .arg("-S")
        .stdin(Stdio::from(input))
        .output()
        .expect("run opt-22");
    assert!(
        output.status.success(),
        "opt-22 failed on {name}:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The Kage pass's output for `tests/ir/<name>`.
pub fn instrument(name: &str) -> String {
    run_opt(name, Some("kage"))
}

/// The Kage pass's output for `tests/ir/<name>` in `mode`, verified explicitly afterwards.
pub fn instrument_in(mode: Mode, name: &str) -> String {
    run_opt_in(mode, name, Some("kage,verify"))
}

pub const NONE: u32 = u32::MAX;

/// One `struct kage_region` read back from the printed initializer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    pub kind: u32,
    pub parent: u32,
    pub first_line: u32,
    pub last_line: u32,
    pub local_index: u32,
    pub name: String,
    pub symbol: String,
    pub file: String,
    /// Its source region's cell when the module has other copies of it, else `NONE`.
    pub source_cell: u32,
}

/// The line defining global `@name`, if any.
pub fn global_line<'a>(ir: &'a str, name: &str) -> Option<&'a str> {
    let prefix = format!("@{name} = ");
    ir.lines().find(|l| l.starts_with(&prefix))
}

/// Values of `@__kage_str*`-style private strings: global name -> contents.
pub fn strings(ir: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in ir
        .lines()
        .filter(|l| l.contains(" = private unnamed_addr constant ["))
    {
        let name = line[1..line.find(" = ").unwrap()].to_string();
        let value = if let Some(start) = line.find("c\"") {
            let body = &line[start + 2..line.rfind('"').unwrap()];
            decode_llvm_string(body)
        } else {
            String::new() // zeroinitializer: the empty string
        };
        out.insert(name, value);
    }
    out
}

/// Undoes LLVM's `\XX` escapes and drops the terminating NUL.
fn decode_llvm_string(body: &str) -> String {
    let bytes = body.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(&body[i + 1..i + 3], 16).expect("hex escape"));
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    if out.last() == Some(&0) {
        out.pop();
    }
    String::from_utf8(out).expect("UTF-8 string")
}

/// The region table, parsed from `@__kage_regions` (every entry starts `{ i32 -1, ...`
/// since `global_id` is 0xFFFFFFFF before registration).
pub fn regions(ir: &str) -> Vec<Region> {
    let line = global_line(ir, "__kage_regions").expect("@__kage_regions is emitted");
    assert!(
        line.starts_with("@__kage_regions = internal global ["),
        "region table must be an internal writable global: {line}"
    );
    assert!(
        line.ends_with(", align 8"),
        "region table must be 8-aligned: {line}"
    );
    let strings = strings(ir);
    let string = |operand: &str| -> String {
        let name = operand
            .strip_prefix("ptr @")
            .unwrap_or_else(|| panic!("string operand {operand}"));
        strings
            .get(name)
            .unwrap_or_else(|| panic!("no string @{name}"))
            .clone()
    };
    line.split("{ i32 -1, ")
        .skip(1)
        .map(|entry| {
            let fields: Vec<&str> = entry[..entry.find(" }").unwrap()].split(", ").collect();
            assert_eq!(fields.len(), 15, "region entry fields: {entry}");
            let int = |f: &str| f.strip_prefix("i32 ").unwrap().parse::<i64>().unwrap() as u32;
            assert_eq!(fields[8], "ptr @__kage_module", "region.module");
            let symbol = string(fields[6]);
            // region.code: the function itself for function entries, null for the others.
            if int(fields[0]) == 0 {
                assert!(
                    fields[9] == format!("ptr @{symbol}")
                        || fields[9] == format!("ptr @\"{symbol}\""),
                    "region.code of {symbol}: {}",
                    fields[9]
                );
            } else {
                assert_eq!(fields[9], "ptr null", "region.code of a loop or body");
            }
            // The call site: none in these inputs, which have no inlined code (see
            // tests/ir/inlined.ll for inlined calls).
            if int(fields[0]) != 3 {
                assert_eq!(
                    &fields[10..13],
                    ["ptr null", "i32 0", "i32 0"],
                    "an entry that is not an inlined call has no call site"
                );
            }
            // Flags: in-locals (count builds), or a leaf (footprint builds: loops and
            // inlined calls).
            let leaf = format!("i32 {}", kage_abi::footprint::LEAF);
            assert!(
                ["i32 0", "i32 1"].contains(&fields[14])
                    || ([1, 3].contains(&int(fields[0])) && fields[14] == leaf),
                "region.flags: {}",
                fields[14]
            );
            Region {
                kind: int(fields[0]),
                parent: int(fields[1]),
                first_line: int(fields[2]),
                last_line: int(fields[3]),
                local_index: int(fields[4]),
                name: string(fields[5]),
                symbol: string(fields[6]),
                file: string(fields[7]),
                source_cell: int(fields[13]),
            }
        })
        .collect()
}

/// The text of `define ... @name(...) { ... }`.
pub fn function_body<'a>(ir: &'a str, name: &str) -> &'a str {
    let needle = format!(" @{name}(");
    let start = ir
        .lines()
        .scan(0usize, |offset, line| {
            let here = *offset;
            *offset += line.len() + 1;
            Some((here, line))
        })
        .find(|(_, line)| line.starts_with("define ") && line.contains(&needle))
        .map(|(offset, _)| offset)
        .unwrap_or_else(|| panic!("no definition of @{name}"));
    let end = start + ir[start..].find("\n}\n").expect("function end") + 3;
    &ir[start..end]
}

/// A block label line such as `5:` or `lpad:   ; preds = %header`.
pub fn is_label(line: &str) -> bool {
    let first = line.split_whitespace().next().unwrap_or("");
    first.ends_with(':') && !first.starts_with('%')
}

/// One basic block as printed: its label ("" for an unnamed entry block) and its
/// instruction lines (debug records and continuation lines dropped).
#[derive(Debug)]
pub struct Block<'a> {
    pub label: &'a str,
    pub instructions: Vec<&'a str>,
}

/// The blocks of a function body, in order.
pub fn blocks(body: &str) -> Vec<Block<'_>> {
    let mut out = vec![Block {
        label: "",
        instructions: Vec::new(),
    }];
    for line in body.lines().skip(1) {
        let t = line.trim();
        if t.is_empty() || t == "}" || t.starts_with("#dbg_") {
            continue;
        }
        if is_label(t) {
            let label = t.split_whitespace().next().unwrap().trim_end_matches(':');
            out.push(Block {
                label,
                instructions: Vec::new(),
            });
        } else if t.starts_with("to label") || t.starts_with("cleanup") || t.starts_with("catch ") {
            // continuation lines of `invoke` / `landingpad`
            continue;
        } else {
            out.last_mut().unwrap().instructions.push(strip_metadata(t));
        }
    }
    out.retain(|b| !b.instructions.is_empty());
    out
}

/// The `ptr` operand the region hooks get for entry `index` of the table.
pub fn region_operand(ir: &str, index: u32) -> String {
    if index == 0 {
        return "ptr @__kage_regions".into();
    }
    let line = global_line(ir, "__kage_regions").unwrap();
    let ty_end = line.find("] [").unwrap() + 1;
    let array_type = &line["@__kage_regions = internal global ".len()..ty_end];
    format!("ptr getelementptr inbounds ({array_type}, ptr @__kage_regions, i64 0, i64 {index})")
}

/// `call void @<hook>(<region operand>)` as printed (debug attachment stripped).
pub fn region_call(ir: &str, hook: &str, index: u32) -> String {
    format!("call void @{hook}({})", region_operand(ir, index))
}

/// The start of a call of a hook that also takes the frame address (`__kage_func_enter`,
/// `__kage_resume_at`): everything up to the frame operand's name.
pub fn frame_call_prefix(ir: &str, hook: &str, index: u32) -> String {
    format!("call void @{hook}({}, ptr %", region_operand(ir, index))
}

/// An instruction line without its `, !dbg !N` and other metadata attachments.
pub fn strip_metadata(line: &str) -> &str {
    match line.find(", !") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// Whether `inst` is a call to one of the hooks that belong at a block's first insertion point.
pub fn is_block_entry_hook(inst: &str) -> bool {
    [
        "@__kage_func_enter(",
        "@__kage_loop_iter(",
        "@__kage_loop_iter_unless_iterating(",
        "@__kage_settle_unless_innermost(",
        // A count build's promoted tree's exit, before the block's hooks.
        "@__kage_count_regions_exit.",
    ]
    .iter()
    .any(|h| inst.starts_with("call void ") && inst.contains(h))
}

/// Checks, for every function that calls `__kage_func_enter`, that block-entry hooks sit only
/// right after the block's PHIs/landingpad (never after other instructions), and that every
/// `ret`/`resume` outside `dead_blocks` is directly preceded by `__kage_func_exit` (or by a
/// `musttail` call preceded by it).
pub fn check_hook_placement(ir: &str, dead_blocks: &[&str]) {
    for define in ir.lines().filter(|l| l.starts_with("define ")) {
        let after_at = &define[define.find(" @").unwrap() + 2..];
        let name = &after_at[..after_at.find('(').unwrap()];
        let body = function_body(ir, name);
        if !body.contains("@__kage_func_enter(") {
            continue;
        }
        for block in blocks(body) {
            let mut in_prefix = true;
            for (i, inst) in block.instructions.iter().enumerate() {
                // The frame address a block-entry hook passes is computed right before it.
                let is_phi_or_pad = inst.contains(" = phi ")
                    || inst.contains(" = landingpad ")
                    || inst.contains(" = call ptr @llvm.addressofreturnaddress.p0()")
                    || inst.contains("@__kage_resume_at(");
                if is_block_entry_hook(inst) {
                    assert!(
                        in_prefix,
                        "@{name} block {:?}: {inst} is not at the first insertion point: {:#?}",
                        block.label, block.instructions
                    );
                } else if !is_phi_or_pad {
                    in_prefix = false;
                }
                let is_exit = inst.starts_with("ret") || inst.starts_with("resume ");
                if is_exit && !dead_blocks.contains(&block.label) {
                    let mut before = i.checked_sub(1).map(|j| block.instructions[j]);
                    if before.is_some_and(|b| b.contains("musttail call")) {
                        before = i.checked_sub(2).map(|j| block.instructions[j]);
                    }
                    assert!(
                        before.is_some_and(|b| b.starts_with("call void @__kage_func_exit(")),
                        "@{name} block {:?}: {inst} without __kage_func_exit before it: {:#?}",
                        block.label,
                        block.instructions
                    );
                }
            }
        }
    }
}

/// Checks that `llvm.global_ctors` registers the module at priority 1 through a constructor
/// that calls `__kage_register_module(&__kage_module)`, for a module built in mode 0.
pub fn check_registration(ir: &str) {
    check_registration_in(Mode::Calls, ir);
}

/// [`check_registration`] for a module built in `mode`: `kage_module.instrumentation` says so.
pub fn check_registration_in(mode: Mode, ir: &str) {
    let ctors = global_line(ir, "llvm.global_ctors").expect("llvm.global_ctors");
    assert!(
        ctors.starts_with("@llvm.global_ctors = appending global ["),
        "{ctors}"
    );
    assert!(
        ctors.contains("{ i32 1, ptr @__kage_module_ctor, ptr null }"),
        "{ctors}"
    );
    let ctor = function_body(ir, "__kage_module_ctor");
    assert!(
        ctor.starts_with("define internal void @__kage_module_ctor()"),
        "{ctor}"
    );
    assert!(
        ctor.contains("call void @__kage_register_module(ptr @__kage_module)"),
        "{ctor}"
    );
    let module = global_line(ir, "__kage_module").expect("@__kage_module");
    let count = regions(ir).len();
    let strings = strings(ir);
    let prefix = format!(
        "@__kage_module = internal global {{ i32, i32, ptr, ptr, i32, i32, i32, i32 }} {{ i32 {}, i32 {count}, ptr @__kage_regions, ptr @",
        kage_abi::VERSION
    );
    // The line shift: 64-byte lines in the working-set modes (the tests' default build).
    let line_shift = match mode {
        Mode::Calls | Mode::Counts | Mode::Footprint => 0,
        Mode::WorkingSet | Mode::WorkingSetTrace => 6,
    };
    let suffix = format!(
        ", i32 {}, i32 {line_shift}, i32 0, i32 0 }}, align 8",
        mode.abi_value()
    );
    assert!(
        module.starts_with(&prefix) && module.ends_with(&suffix),
        "{module}"
    );
    let name_global = &module[prefix.len()..module.len() - suffix.len()];
    assert!(
        strings.contains_key(name_global),
        "module_name string {name_global}"
    );
}

/// `source` compiled by `compiler` (`clang-22`, `clang++-22`) into `dir` as LLVM IR, as an
/// -O2 pipeline begins with it: value names kept, line tables, nothing optimised yet.
pub fn early_ir(compiler: &str, source: &Path, dir: &Path) -> PathBuf {
    let ll = dir.join(source.file_stem().unwrap()).with_extension("ll");
    let status = Command::new(compiler)
        .args([
            "-O2",
            "-Xclang",
            "-disable-llvm-passes",
            "-gline-tables-only",
        ])
        .args(["-fno-discard-value-names", "-S", "-emit-llvm", "-o"])
        .arg(&ll)
        .arg(source)
        .current_dir(source.parent().unwrap())
        .status()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(
        status.success(),
        "{compiler} failed on {}",
        source.display()
    );
    ll
}

/// `opt-22 -passes=<passes> -S` with the plugin on the IR file `ll`, with `env` set (and
/// `KAGE_TOOL` unset unless `env` sets it); asserts success and returns the output.
pub fn run_plugin_on(ll: &Path, env: &[(&str, &str)], passes: &str) -> String {
    let output = Command::new("opt-22")
        .env_remove("KAGE_TOOL")
        .envs(env.iter().copied())
        .arg(format!("-load-pass-plugin={}", plugin_path().display()))
        .arg(format!("-passes={passes}"))
        .arg("-S")
        .arg(ll)
        .output()
        .expect("run opt-22");
    assert!(
        output.status.success(),
        "opt-22 failed on {}:\n{}",
        ll.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("opt output is UTF-8")
}
