//! The wrappers as a build system uses them: every compiler mode, several sources,
//! link-only calls, response files, shared libraries, C++, `make`, and a real program
//! (the Lua interpreter from the `lua-src` crate's sources) that must behave as natively built.

mod e2e_support;
use e2e_support::*;
use object::Object;
use std::path::{Path, PathBuf};
use std::process::Command;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(work: &Work, name: &str, contents: &str) -> PathBuf {
    let path = work.path(name);
    std::fs::write(&path, contents).unwrap();
    path
}

const PART_A: &str = "#include \"common.h\"\nvolatile int a_data[4];\nNOINLINE void part_a(void) { a_data[0] = 1; a_data[1] = 2; }\n";
const PART_B: &str = "#include \"common.h\"\nvoid part_a(void);\nvolatile int b_data[4];\nint main(void) { part_a(); b_data[0] = b_data[1]; return 0; }\n";

#[test]
fn every_compiler_mode_passes_through() {
    let work = Work::new();
    std::fs::copy(c_dir().join("common.h"), work.path("common.h")).unwrap();
    write(&work, "a.c", PART_A);
    write(&work, "b.c", PART_B);

    // -E: preprocessed source on stdout, nothing instrumented.
    let out = work.wrap(&kage_cc(), &["-E", "a.c"]);
    assert!(text(&out.stdout).contains("part_a(void)"));

    // -M: make rules on stdout.
    let out = work.wrap(&kage_cc(), &["-M", "a.c"]);
    let rules = text(&out.stdout);
    assert!(
        rules.starts_with("a.o:") && rules.contains("common.h"),
        "{rules}"
    );

    // -MD -c: an object and its dependency file.
    work.wrap(&kage_cc(), &["-MD", "-O2", "-c", "a.c", "-o", "dep.o"]);
    assert!(work.path("dep.o").exists());
    assert!(std::fs::read_to_string(work.path("dep.d"))
        .unwrap()
        .contains("common.h"));

    // -S: assembly that calls the runtime (where the inline checks at a function's entry
    // fail) and updates the thread's records inline, reaching the runtime's thread-locals
    // at an offset the link fixes (local-exec) and its globals directly in code for an
    // executable, through the GOT in code that may go into a shared library.
    work.wrap(&kage_cc(), &["-S", "-O2", "a.c", "-o", "a.s"]);
    let asm = std::fs::read_to_string(work.path("a.s")).unwrap();
    assert!(asm.contains("__kage_count_prepare"), "{asm}");
    assert!(asm.contains("%fs:__kage_count_thread@TPOFF"), "{asm}");
    assert!(asm.contains("__kage_gate(%rip)"), "{asm}");
    assert!(
        !asm.contains("GOTTPOFF") && !asm.contains("__kage_gate@GOTPCREL"),
        "{asm}"
    );
    for (flag, thread_local, global) in [
        ("-fno-pic", "@TPOFF", "__kage_gate(%rip)"),
        ("-fPIE", "@TPOFF", "__kage_gate(%rip)"),
        ("-fPIC", "@GOTTPOFF", "__kage_gate@GOTPCREL"),
    ] {
        work.wrap(&kage_cc(), &["-S", "-O2", flag, "a.c", "-o", "model.s"]);
        let asm = std::fs::read_to_string(work.path("model.s")).unwrap();
        assert!(
            asm.contains(&format!("__kage_count_thread{thread_local}")),
            "{flag}: {asm}"
        );
        assert!(asm.contains(global), "{flag}: {asm}");
    }
    // A shared library compiled and linked in one call without -fPIC (-fPIE code, which
    // links when it defines no global): its code reaches the runtime as -fPIC code does.
    write(
        &work,
        "sum.c",
        "int sum(const int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }\n",
    );
    work.wrap(&kage_cc(), &["-O2", "-shared", "sum.c", "-o", "libsum.so"]);
    assert!(work.path("libsum.so").exists());

    // Several sources in one -c call, then a link-only call.
    work.wrap(&kage_cc(), &["-O2", "-c", "a.c", "b.c"]);
    work.wrap(&kage_cc(), &["a.o", "b.o", "-o", "two"]);
    // The region tables' pointers are packed (RELR), not one 24-byte RELA entry each.
    let exe = std::fs::read(work.path("two")).unwrap();
    let elf = object::File::parse(&*exe).unwrap();
    assert!(elf.section_by_name(".relr.dyn").is_some());
    let report = work.run_report(&work.path("two"), &[], 0);
    assert_counts(func(&report, "part_a"), 1, c(0, 2, 0, 8), c(0, 2, 0, 8));
    assert_counts(func(&report, "main"), 1, c(1, 3, 4, 12), c(1, 1, 4, 4));
    let files: Vec<&str> = report.regions.iter().map(|r| r.file.as_str()).collect();
    assert!(files.iter().any(|f| f.ends_with("a.c")) && files.iter().any(|f| f.ends_with("b.c")));

    // A response file holding the whole command line.
    write(&work, "args.rsp", "-O2 \"b.c\" a.c -o from_rsp\n");
    work.wrap(&kage_cc(), &["@args.rsp"]);
    let report = work.run_report(&work.path("from_rsp"), &[], 0);
    assert_eq!(stats(func(&report, "main")).inclusive, c(1, 3, 4, 12));

    // Probes autoconf makes.
    let out = work.wrap(&kage_cc(), &["--version"]);
    assert!(
        text(&out.stdout).contains("clang version 22"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_shared_library_registers_its_own_regions() {
    let work = Work::new();
    let dir = c_dir().join("shlib");
    let lib = work.path("libkshared.so");
    work.wrap(
        &kage_cc(),
        &[
            "-O2",
            "-shared",
            "-fPIC",
            dir.join("lib.c").to_str().unwrap(),
            "-o",
            lib.to_str().unwrap(),
        ],
    );
    let exe = work.path("main");
    let rpath = format!("-Wl,-rpath,{}", work.dir.path().display());
    let libdir = format!("-L{}", work.dir.path().display());
    work.wrap(
        &kage_cc(),
        &[
            "-O2",
            dir.join("main.c").to_str().unwrap(),
            &libdir,
            "-lkshared",
            &rpath,
            "-o",
            exe.to_str().unwrap(),
        ],
    );
    let report = work.run_report(&exe, &[], 0);
    let lib_fill = func(&report, "lib_fill");
    assert!(lib_fill.file.ends_with("shlib/lib.c"));
    assert_counts(lib_fill, 2, c(0, 24, 0, 96), c(0, 0, 0, 0));
    assert_eq!(
        stats(body_of(&report, only_loop(&report, lib_fill))).instances,
        24
    );
    assert_counts(func(&report, "main"), 1, c(0, 25, 0, 100), c(0, 1, 0, 4));
}

#[test]
fn kage_cxx_under_the_name_kage_cxx_plus_plus_compiles_cxx() {
    let work = Work::new();
    let link = work.path("kage-c++");
    std::os::unix::fs::symlink(kage_cxx(), &link).unwrap();
    let exe = work.path("exc");
    work.wrap(
        &link,
        &[
            "-O2",
            c_dir().join("exception.cpp").to_str().unwrap(),
            "-o",
            exe.to_str().unwrap(),
        ],
    );
    let report = work.run_report(&exe, &[], 0);
    assert_eq!(stats(func(&report, "thrower")).instances, 4);
}

/// The directory of Lua 5.4's sources inside the `lua-src` crate (a dev-dependency, so
/// cargo has fetched it).
fn lua_sources() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        text(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifest = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "lua-src")
        .expect("lua-src is a dev-dependency")["manifest_path"]
        .as_str()
        .unwrap()
        .to_owned();
    let root = Path::new(&manifest).parent().unwrap();
    std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("lua-5.4")
        })
        .expect("lua-5.4 sources in lua-src")
}

fn make_lua(work: &Work, subdir: &str, cc: &str, sources: &Path) -> PathBuf {
    let dir = work.path(subdir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = Command::new("make")
        .args(["-s", "-j2", "-f"])
        .arg(c_dir().join("lua/Makefile"))
        .arg(format!("LUA_SRC={}", sources.display()))
        .arg(format!("CC={cc}"))
        .current_dir(&dir)
        .output()
        .expect("make is installed by scripts/setup.sh");
    assert!(
        out.status.success(),
        "make CC={cc} failed:\n{}",
        text(&out.stderr)
    );
    dir.join("lua")
}

#[test]
fn lua_built_with_make_and_kage_cc_behaves_as_the_native_build() {
    let work = Work::new();
    let sources = lua_sources();
    let native = make_lua(&work, "native", "clang-22", &sources);
    let instrumented = make_lua(&work, "kage", kage_cc().to_str().unwrap(), &sources);
    let script = c_dir().join("lua/workload.lua");
    let script = script.to_str().unwrap();

    let expected = Command::new(&native).arg(script).output().unwrap();
    assert!(expected.status.success());
    let report_path = work.path("lua.json");
    let got = work.run_with_options(
        &instrumented,
        &[script],
        &format!("output={}", report_path.display()),
    );
    assert!(got.status.success(), "{}", text(&got.stderr));
    assert_eq!(
        text(&got.stdout),
        text(&expected.stdout),
        "same output as the native build"
    );
    assert!(text(&expected.stdout).contains("errors caught\t33"));

    let report = kage_report::read_report(&report_path).unwrap();
    assert!(report.complete);
    assert_totals_consistent(&report);
    // The interpreter's main loop ran, and every pcall error (a longjmp) left main intact.
    let execute = stats(func(&report, "luaV_execute"));
    // One activation per call from C into Lua (the 100 pcalls, the chunk, sort comparators...).
    assert!(
        execute.instances >= 100 && execute.inclusive.loads > 1_000_000,
        "{execute:?}"
    );
    let main = stats(func(&report, "main"));
    assert_eq!(main.instances, 1);
    assert_eq!(
        Some(main.inclusive),
        report.count_totals(),
        "every access happened inside main"
    );
    let protected = stats(func(&report, "luaD_rawrunprotected"));
    assert!(protected.instances >= 100, "{protected:?}");
}

/// Runs a build tool in `dir` and requires success.
fn run_tool(
    dir: &Path,
    program: &str,
    args: &[&str],
    env: &[(&str, &Path)],
) -> std::process::Output {
    let mut cmd = Command::new(program);
    cmd.args(args).current_dir(dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e} (scripts/setup.sh installs it)"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// Also with `-flto`: CMake takes the "kage-" of kage-cc for a toolchain prefix and looks
/// for `kage-llvm-ar` beside it; without it, it archived the static library's clang 22
/// bitcode with the system's older llvm-ar, which cannot read it.
#[test]
fn a_cmake_project_builds_with_cc_kage_cc_and_cxx_kage_cxx() {
    let work = Work::new();
    let cxx = work.path("kage-c++");
    std::os::unix::fs::symlink(kage_cxx(), &cxx).unwrap();
    let source = c_dir().join("cmake");
    for (name, flags) in [("build", ""), ("build-lto", "-flto")] {
        let build = work.path(name);
        let (cc, src, bld) = (
            kage_cc(),
            source.to_str().unwrap().to_owned(),
            build.to_str().unwrap().to_owned(),
        );
        let release = "-DCMAKE_BUILD_TYPE=Release";
        let c_flags = format!("-DCMAKE_C_FLAGS={flags}");
        let cxx_flags = format!("-DCMAKE_CXX_FLAGS={flags}");
        let link_flags = format!("-DCMAKE_EXE_LINKER_FLAGS={flags}");
        run_tool(
            work.dir.path(),
            "cmake",
            &[
                "-S",
                &src,
                "-B",
                &bld,
                release,
                &c_flags,
                &cxx_flags,
                &link_flags,
            ],
            &[("CC", &cc), ("CXX", &cxx)],
        );
        let cache = std::fs::read_to_string(build.join("CMakeCache.txt")).unwrap();
        assert!(
            cache.contains("CMAKE_C_COMPILER:FILEPATH=") && cache.contains("kage-cc"),
            "CMake uses kage-cc"
        );
        run_tool(work.dir.path(), "cmake", &["--build", &bld], &[]);
        let report = work.run_report(&build.join("probe"), &[], 0);
        let scale = func(&report, "scale");
        assert!(scale.file.ends_with("cmake/scale.c"), "{name}");
        assert_counts(scale, 1, c(0, 16, 0, 64), c(0, 0, 0, 0));
        assert_eq!(stats(func(&report, "main")).inclusive.stores, 16, "{name}");
    }
}

#[test]
fn an_autoconf_project_configures_and_builds_with_cc_kage_cc() {
    let work = Work::new();
    let src = work.path("src");
    std::fs::create_dir_all(src.join("autoconf")).unwrap();
    std::fs::copy(c_dir().join("common.h"), src.join("common.h")).unwrap();
    for file in ["configure.ac", "Makefile.in", "probe.c"] {
        std::fs::copy(
            c_dir().join("autoconf").join(file),
            src.join("autoconf").join(file),
        )
        .unwrap();
    }
    let project = src.join("autoconf");
    run_tool(&project, "autoconf", &[], &[]);
    let cc = format!("CC={}", kage_cc().display());
    let out = run_tool(&project, "./configure", &[&cc, "CFLAGS=-O2"], &[]);
    let log = text(&out.stdout);
    assert!(
        log.contains("checking whether the C compiler works... yes"),
        "{log}"
    );
    assert!(log.contains("checking for memset... yes"), "{log}");
    run_tool(&project, "make", &[], &[]);
    let exe = project.join("probe");
    let out = Command::new(&exe)
        .env(
            "KAGE_OPTIONS",
            format!("output={}", work.path("r.json").display()),
        )
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "have memset\n");
    let report = kage_report::read_report(&work.path("r.json")).unwrap();
    assert_counts(func(&report, "count_up"), 1, c(0, 8, 0, 32), c(0, 0, 0, 0));
}

#[test]
fn objects_compiled_without_kage_are_named_at_link_time_and_when_the_program_starts() {
    let work = Work::new();
    std::fs::copy(c_dir().join("common.h"), work.path("common.h")).unwrap();
    write(&work, "a.c", PART_A);
    write(&work, "b.c", PART_B);
    let plain_cc = |source: &str, object: &str| {
        let status = Command::new("clang-22")
            .args(["-O2", "-c", source, "-o", object])
            .current_dir(work.dir.path())
            .status()
            .unwrap();
        assert!(status.success());
    };
    let run = |exe: &str| {
        let out = work.run_with_options(&work.path(exe), &[], "output=r.json");
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stderr)
    };

    // Everything from a plain build, linked by kage-cc: both objects named, and the program
    // says that nothing is measured.
    plain_cc("a.c", "a.o");
    plain_cc("b.c", "b.o");
    let link = text(&work.wrap(&kage_cc(), &["a.o", "b.o", "-o", "plain"]).stderr);
    assert!(
        link.contains("kage-cc: warning: 2 object files were compiled without kage-cc (a.o, b.o)")
            && link.contains("make clean"),
        "{link}"
    );
    let said = run("plain");
    assert!(
        said.contains("none of its code was compiled with it") && said.contains("make clean"),
        "{said}"
    );
    assert!(
        !work.path("r.json").exists(),
        "nothing ran instrumented, no report"
    );
    // `kage run` passes the program's stderr through: it says the same.
    let out = Command::new(kage())
        .args(["run", "--", "./plain"])
        .current_dir(work.dir.path())
        .output()
        .unwrap();
    assert!(
        text(&out.stderr).contains("none of its code was compiled with it"),
        "{}",
        text(&out.stderr)
    );

    // Half of it: the instrumented module is counted, the plain object named at link time.
    work.wrap(&kage_cc(), &["-O2", "-c", "b.c", "-o", "b.o"]);
    let link = text(&work.wrap(&kage_cc(), &["a.o", "b.o", "-o", "half"]).stderr);
    assert!(
        link.contains("1 object file was compiled without kage-cc (a.o): its code is not measured"),
        "{link}"
    );
    let said = run("half");
    assert!(
        said.contains(
            "1 module of this program was compiled with kage-cc (for count), but some of \
             its object files were not"
        ),
        "{said}"
    );
    assert!(work.path("r.json").exists());

    // All of it compiled by kage-cc: not a word.
    work.wrap(&kage_cc(), &["-O2", "-c", "a.c", "-o", "a.o"]);
    let link = text(&work.wrap(&kage_cc(), &["a.o", "b.o", "-o", "full"]).stderr);
    assert!(!link.contains("warning"), "{link}");
    assert!(!run("full").contains("warning"));
}
