//! Loads the plugin into clang-22 itself (`-fpass-plugin`), at -O2 and at -O0: the pass must
//! run in both pipelines (OptimizerLast is invoked by the -O0 pipeline too) and produce an
//! object that calls the runtime.

mod support;

use std::process::Command;

const TINY_C: &str = r#"
int sum(const int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}
"#;

fn compile_and_list_symbols(opt_level: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("tiny.c");
    let object = dir.path().join("tiny.o");
    std::fs::write(&source, TINY_C).unwrap();
    let mut clang = Command::new("clang-22");
    support::Mode::Calls.apply(&mut clang);
    let status = clang
        .arg(opt_level)
        .arg("-g")
        .arg(format!(
            "-fpass-plugin={}",
            support::plugin_path().display()
        ))
        .arg("-c")
        .arg(&source)
        .arg("-o")
        .arg(&object)
        .status()
        .expect("run clang-22");
    assert!(
        status.success(),
        "clang-22 {opt_level} with the plugin failed"
    );
    let nm = Command::new("llvm-nm-22")
        .arg(&object)
        .output()
        .expect("run llvm-nm-22");
    assert!(nm.status.success());
    String::from_utf8(nm.stdout).unwrap()
}

fn assert_instrumented(symbols: &str) {
    let has = |kind: &str, name: &str| {
        symbols.lines().any(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            fields.len() >= 2
                && fields[fields.len() - 2] == kind
                && fields[fields.len() - 1] == name
        })
    };
    for hook in [
        "__kage_load",
        "__kage_func_enter",
        "__kage_func_exit",
        "__kage_loop_iter",
    ] {
        assert!(has("U", hook), "undefined {hook} expected in:\n{symbols}");
    }
    // Weak: a library loaded without the runtime says so instead of failing to load.
    assert!(
        has("w", "__kage_register_module"),
        "weak __kage_register_module expected in:\n{symbols}"
    );
    assert!(
        has("t", "__kage_module_ctor"),
        "local constructor expected in:\n{symbols}"
    );
    assert!(
        has("d", "__kage_regions"),
        "local region table expected in:\n{symbols}"
    );
}

#[test]
fn clang_o2_runs_the_pass() {
    assert_instrumented(&compile_and_list_symbols("-O2"));
}

#[test]
fn clang_o0_runs_the_pass() {
    assert_instrumented(&compile_and_list_symbols("-O0"));
}

const WORKING_SET_C: &str = r#"
struct point { int x, y, z, w; };

void increment(int *restrict a, const int *restrict b, int n) {
  for (int i = 0; i < n; i++)
    a[i] = b[i] + 1;
}

void clear(struct point *p) {
  p->x = 0; p->y = 0; p->z = 0; p->w = 0;
}

void wipe(char *p, unsigned long n) { __builtin_memset(p, 0, n); }

int search(const int *a, int n, int x) {
  for (int i = 0; i < n; i++)
    if (a[i] == x)
      return i;
  return -1;
}
"#;

/// `clang-22 -S -emit-llvm -g` of [`WORKING_SET_C`] with `KAGE_TOOL=working-set` (on the
/// child only), checked by `opt-22 -passes=verify`.
fn working_set_ir(opt_level: &str) -> String {
    plugin_ir(support::Mode::WorkingSet, WORKING_SET_C, opt_level)
}

/// `clang-22 -S -emit-llvm -g` of `source` with the plugin in `mode` (on the child only),
/// checked by `opt-22 -passes=verify`.
fn plugin_ir(mode: support::Mode, source: &str, opt_level: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let source_path = dir.path().join("source.c");
    let output = dir.path().join("source.ll");
    std::fs::write(&source_path, source).unwrap();
    let mut clang = Command::new("clang-22");
    mode.apply(&mut clang);
    let status = clang
        .arg(opt_level)
        .arg("-g")
        .arg(format!(
            "-fpass-plugin={}",
            support::plugin_path().display()
        ))
        .args(["-S", "-emit-llvm"])
        .arg(&source_path)
        .arg("-o")
        .arg(&output)
        .status()
        .expect("run clang-22");
    assert!(
        status.success(),
        "clang-22 {opt_level} with the plugin ({mode:?}) failed"
    );
    let verify = Command::new("opt-22")
        .args(["-passes=verify", "-disable-output"])
        .arg(&output)
        .output()
        .expect("run opt-22");
    assert!(
        verify.status.success(),
        "invalid module at {opt_level}:\n{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    std::fs::read_to_string(&output).unwrap()
}

/// A function whose deferred entry adds its own counts on two paths (one with no store),
/// and a loop counted in records around a rare call: additions of counts that fold to 0 once
/// the helpers are inlined.
const WRITE_BACK_C: &str = r#"
int g(int *p);
int f(int *a, int n) {
  if (n < 0) return a[0];
  int s = a[1];
  s += g(a);
  a[2] = s;
  return s;
}
int h(int *a, int n) {
  int s = 0;
  for (int i = 0; i < n; i++) {
    s += a[i];
    if (a[i] == 7) s += g(a);
  }
  return s;
}
"#;

/// The relaxed loads and stores of words only the thread writes whose store writes back
/// what the load just read (`%v = load atomic i64, ptr %p` then `store atomic i64 %v, ptr %p`).
fn write_backs(ir: &str) -> Vec<String> {
    let lines: Vec<&str> = ir.lines().map(str::trim).collect();
    let mut found = Vec::new();
    for pair in lines.windows(2) {
        let Some((value, rest)) = pair[0].split_once(" = load atomic i64, ptr ") else {
            continue;
        };
        let pointer = rest.split_whitespace().next().unwrap_or("");
        let store = format!("store atomic i64 {value}, ptr {pointer} ");
        if pair[1].starts_with(&store) {
            found.push(format!("{}\n{}", pair[0], pair[1]));
        }
    }
    found
}

#[test]
fn count_build_leaves_no_write_back_of_a_count_that_folded_to_zero() {
    let ir = plugin_ir(support::Mode::Counts, WRITE_BACK_C, "-O2");
    assert!(
        ir.contains("!kage.own_word"),
        "the count build's additions are marked"
    );
    let found = write_backs(&ir);
    assert!(
        found.is_empty(),
        "write-backs left:\n{}",
        found.join("\n\n")
    );
    // A compiler barrier in each one's place (the backend moved nothing across the store).
    assert!(
        ir.contains("fence syncscope(\"singlethread\") seq_cst"),
        "no barrier where the write-backs were"
    );
}

/// A list walk whose body is two inlined helpers: the body's instances and loads and the
/// helpers' instances, loads and stores run once per iteration.
const SHARED_COUNTER_C: &str = r#"
struct node { struct node *next; int value; };
static inline int get(const struct node *p) { return p->value; }
static inline void put(struct node *p, int v) { p->value = v; }
int walk(struct node *p) {
  int sum = 0;
  for (; p; p = p->next) {
    sum += get(p);
    put(p, sum);
  }
  return sum;
}
"#;

#[test]
fn count_build_counts_a_loop_body_and_the_helpers_inlined_in_it_with_one_counter() {
    let ir = plugin_ir(support::Mode::Counts, SHARED_COUNTER_C, "-O2");
    let start = ir.find("@walk(").expect("walk is defined");
    let walk = &ir[start..start + ir[start..].find("\n}\n").expect("walk ends")];
    // The loop's header: the block that loads the node's value.
    let header = (walk.split("\n\n"))
        .find(|block| block.contains("load i32, ptr"))
        .expect("the loop's header");
    let counters = header.lines().filter(|l| l.contains("= phi i64 ")).count();
    // One counter for the class of the block that stores (the body's loads, `get`'s
    // loads, `put`'s instance and stores: four counts without it), and the two counts
    // added on the back edge, which runs one iteration fewer (the body's iteration and
    // `get`'s instance, which the way in counts the first time).
    assert_eq!(counters, 3, "{header}");
}

/// A function counting `helpers` inlined loops that call out (each loop and its body
/// counted in records), picked by a switch in a loop, as an interpreter's cases are.
fn many_records_source(helpers: usize) -> String {
    let mut source = String::from("void ext(int);\n");
    for k in 0..helpers {
        source += &format!(
            "static inline void h{k}(int *a, int n) {{ for (int i = 0; i < n; i++) ext(a[i] + {k}); }}\n"
        );
    }
    source += "void run(int *code, int *a, int n) {\n  for (int pc = 0; pc < n; pc++) {\n    switch (code[pc]) {\n";
    for k in 0..helpers {
        source += &format!("    case {k}: h{k}(a, code[pc + 1]); break;\n");
    }
    source += "    }\n  }\n}\n";
    source
}

#[test]
fn count_build_reads_the_records_base_at_each_use_in_a_function_of_many_records() {
    // 40 helpers: 80 regions counted in records, beyond the 64 from which the base is read
    // afresh (else LLVM hoists every record's address out of the loop and the register
    // allocator spills them all at each call); 10 helpers: the base stays in a register.
    let reads = |helpers: usize| {
        let ir = plugin_ir(support::Mode::Counts, &many_records_source(helpers), "-O2");
        let start = ir.find("@run(").expect("run is defined");
        let run = &ir[start..start + ir[start..].find("\n}\n").expect("run ends")];
        run.matches("load volatile ptr").count()
    };
    assert!(reads(40) >= 40, "{}", reads(40));
    assert_eq!(reads(10), 0);
}

/// The helpers were inlined (and then deleted); the runtime's fast-path symbols are used.
fn assert_inlined_working_set(ir: &str) {
    for helper in [
        "__kage_ws_budget_check",
        "__kage_ws_budget_load",
        "__kage_ws_budget_store",
        "__kage_ws_mark_range",
        "__kage_ws_mark_pair",
        "__kage_ws_mark_line",
    ] {
        assert!(
            !ir.contains(&format!("@{helper}(")),
            "{helper} left in:\n{ir}"
        );
    }
    for symbol in ["@__kage_ws_budget = external dso_local thread_local(localexec) global i64"] {
        assert!(
            ir.lines().any(|l| l.starts_with(symbol)),
            "{symbol} missing"
        );
    }
    // x86-64: the cold tick call keeps the caller's registers (the runtime's trampoline).
    assert!(ir.contains("call preserve_mostcc void @__kage_ws_tick("));
    assert!(ir.contains("declare preserve_mostcc void @__kage_ws_tick(ptr)"));
    assert!(ir.contains("call void @__kage_ws_mark_lines("));
    // (the clean-up's InstCombine may mark the module's address `nonnull`)
    assert!(ir
        .lines()
        .any(|l| l.contains("call void @__kage_register_module(ptr ")
            && l.contains(" @__kage_module)")));
    assert!(!ir.contains("@__kage_load") && !ir.contains("@__kage_func_enter"));
    let module = ir
        .lines()
        .find(|l| l.starts_with("@__kage_module = "))
        .unwrap();
    assert!(
        module.contains(", i32 1, i32 6, i32 0, i32 "),
        "instrumentation 1, 64-byte lines: {module}"
    );
    // The line shift is a constant, with no mask before it.
    assert!(
        ir.lines()
            .any(|l| l.contains("lshr i64 %") && (l.ends_with(", 6") || l.contains(", 6, !dbg"))),
        "{ir}"
    );
    assert!(
        !ir.contains("__kage_ws_line_shift") && !ir.contains("140737488355327"),
        "{ir}"
    );
}

#[test]
fn clang_o2_inlines_the_working_set_helpers() {
    let ir = working_set_ir("-O2");
    assert_inlined_working_set(&ir);
    // The local budget lives in registers once optimised (at -O0 it stays an alloca).
    assert!(!ir.contains("%kage.budget"), "{ir}");
}

#[test]
fn clang_o0_inlines_the_working_set_helpers() {
    assert_inlined_working_set(&working_set_ir("-O0"));
}
