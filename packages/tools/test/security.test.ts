/**
 * Attacks on the shell sandbox and the workspace guards, run for real: planted programs, real
 * child processes, real temp folders, real git repositories.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Context, Effect, Either, Fiber, Layer, Option } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { ToolRegistry } from "@rx/kernel"
import { Builtins, Sandbox } from "../src/index.js"
import * as Limits from "../src/internal/limits.js"
import { callIdOf, failed, invoke, makeDirs, ok, sha256, withTools } from "./helpers.js"
import { alive } from "./shellSuite.js"

/** Whether the trusted bubblewrap is here and works; the reason when it is not. */
const unavailable: string | undefined = await (async () => {
  const dirs = makeDirs()
  const found = Sandbox.find(dirs.ws)
  const problem = Either.isLeft(found) ? found.left : await Effect.runPromise(Sandbox.probe(found.right, dirs.ws))
  dirs.cleanup()
  return problem
})()
if (unavailable !== undefined) console.warn(`SKIPPING the bubblewrap security tests: ${unavailable}`)

/** Whether rx can make a cgroup per call here (it can when root, or with a delegated cgroup). */
const cgroups = Limits.discover()
if (cgroups === undefined) console.warn("SKIPPING the tests that need a cgroup per call: none can be created here")

const root = process.getuid?.() === 0

const tag = () => String(100_000 + Math.floor(Math.random() * 899_999))

/** A program that drops bwrap's options and runs the command on the host, leaving a trace. */
const fakeBwrap = (at: string, trace: string) => {
  fs.mkdirSync(path.dirname(at), { recursive: true })
  fs.writeFileSync(at, `#!/bin/sh\necho ran > '${trace}'\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n`, { mode: 0o755 })
}

const git = (cwd: string, ...args: Array<string>) =>
  execFileSync("git", args, { cwd, encoding: "utf8", env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" } })

const gitConfig = (cwd: string, key: string): string => {
  try {
    return git(cwd, "config", "--get", key).trim()
  } catch {
    return ""
  }
}

describe.skipIf(unavailable !== undefined)("trusted bubblewrap", () => {
  it.live("a bwrap planted on PATH or in the workspace's node_modules/.bin is never run", () =>
    Effect.gen(function*() {
      const { base, cleanup, ws } = makeDirs()
      const trace = path.join(base, "fake-bwrap-ran")
      fakeBwrap(path.join(base, "bin", "bwrap"), trace)
      fakeBwrap(path.join(ws, "node_modules", ".bin", "bwrap"), trace)
      const saved = process.env["PATH"]
      // As `npm run` does: the workspace's .bin first.
      process.env["PATH"] = `${ws}/node_modules/.bin:${base}/bin:${saved ?? ""}`
      const out = yield* withTools({ workspace: ws, sandbox: "auto" }, invoke("shell", { command: "grep -E '^CapEff:' /proc/self/status" })).pipe(
        Effect.ensuring(Effect.sync(() => {
          process.env["PATH"] = saved
        }))
      )
      const output = ok(out)
      expect(output["sandbox"]).toBe("bwrap")
      expect(String(output["stdout"])).toMatch(/CapEff:\s+0000000000000000/)
      expect(fs.existsSync(trace)).toBe(false)
      cleanup()
    }))

  it.live("a configured bwrapPath inside the workspace or writable by others is refused, with the reason", () =>
    Effect.gen(function*() {
      const { base, cleanup, ws } = makeDirs()
      const trace = path.join(base, "fake-bwrap-ran")
      const inWorkspace = path.join(ws, "node_modules", ".bin", "bwrap")
      fakeBwrap(inWorkspace, trace)
      const refusal = (bwrapPath: string) =>
        withTools({ workspace: ws, sandbox: "bwrap", bwrapPath }, invoke("shell", { command: "true" })).pipe(
          Effect.flip,
          Effect.map((error) => (error._tag === "@rx/tools/SandboxUnavailable" ? error.reason : `unexpected ${error._tag}`))
        )
      expect(yield* refusal(inWorkspace)).toContain("inside the workspace")
      // A folder others may write: they could swap the program.
      const open = path.join(base, "open")
      fakeBwrap(path.join(open, "bwrap"), trace)
      fs.chmodSync(open, 0o777)
      expect(yield* refusal(path.join(open, "bwrap"))).toContain("writable by its group or by others")
      // A program others may write.
      const loose = path.join(base, "loose")
      fakeBwrap(path.join(loose, "bwrap"), trace)
      fs.chmodSync(path.join(loose, "bwrap"), 0o757)
      expect(yield* refusal(path.join(loose, "bwrap"))).toContain("writable by its group or by others")
      if (root) {
        const foreign = path.join(base, "foreign")
        fakeBwrap(path.join(foreign, "bwrap"), trace)
        fs.chownSync(path.join(foreign, "bwrap"), 4321, 4321)
        expect(yield* refusal(path.join(foreign, "bwrap"))).toContain("owned by uid 4321")
      }
      // Mode auto does not offer shell, and says why.
      const missing = yield* Builtins.unavailable({ workspace: ws, sandbox: "auto", bwrapPath: inWorkspace })
      expect(missing.map((m) => m.tool)).toEqual(["shell"])
      expect(missing[0]?.reason).toContain("inside the workspace")
      expect(failed(yield* withTools({ workspace: ws, sandbox: "auto", bwrapPath: inWorkspace }, invoke("shell", { command: "true" }))).message)
        .toContain(`there is no tool named "shell"`)
      expect(fs.existsSync(trace)).toBe(false)
      // The trusted one, named explicitly, works.
      const good = ok(yield* withTools({ workspace: ws, sandbox: "bwrap", bwrapPath: "/usr/bin/bwrap" }, invoke("shell", { command: "echo fine" })))
      expect(good["stdout"]).toBe("fine\n")
      cleanup()
    }))

  it("a relative bwrapPath is an invalid config", () => {
    expect(Sandbox.untrusted("bin/bwrap", "/nonexistent")).toContain("not an absolute path")
    expect(Sandbox.untrusted("/tmp", "/nonexistent")).toBeDefined()
  })
})

describe.skipIf(unavailable !== undefined)("protected paths in the sandbox", () => {
  const setup = () => {
    const dirs = makeDirs()
    git(dirs.ws, "init", "-q")
    return { ...dirs, config: { workspace: dirs.ws, sandbox: "bwrap" as const, shellGraceMs: 500 } }
  }

  it.live("a shell step cannot plant a git hook, set core.fsmonitor, or remove .git; the rest stays writable", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const out = ok(yield* withTools(config, invoke("shell", {
        command: [
          "echo 'touch /tmp/pwned' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit",
          "git config core.fsmonitor 'touch /tmp/pwned'; echo config=$?",
          "ln -s .git/hooks h; echo x > h/post-checkout",
          "rm -rf .git 2>/dev/null; mv .git moved; ln .git/config hardlink",
          "echo work > file.txt",
          "cat .git/HEAD"
        ].join("\n")
      })))
      expect(String(out["stderr"])).toContain("Read-only file system")
      expect(String(out["stdout"])).toContain("config=255")
      // Reading .git works: git log, git diff and git status stay usable.
      expect(String(out["stdout"])).toContain("ref: refs/heads/")
      expect(fs.existsSync(path.join(ws, ".git", "hooks", "pre-commit"))).toBe(false)
      expect(fs.existsSync(path.join(ws, ".git", "hooks", "post-checkout"))).toBe(false)
      expect(gitConfig(ws, "core.fsmonitor")).toBe("")
      expect(fs.existsSync(path.join(ws, ".git", "config"))).toBe(true)
      expect(fs.existsSync(path.join(ws, "moved"))).toBe(false)
      expect(fs.existsSync(path.join(ws, "hardlink"))).toBe(false)
      expect(fs.readFileSync(path.join(ws, "file.txt"), "utf8")).toBe("work\n")
      cleanup()
    }))

  it.live("nested repositories and a submodule's .git file are held too", () =>
    Effect.gen(function*() {
      const { cleanup, config, outside, ws } = setup()
      fs.mkdirSync(path.join(ws, "vendor", "lib"), { recursive: true })
      git(path.join(ws, "vendor", "lib"), "init", "-q")
      fs.mkdirSync(path.join(ws, "mod"))
      fs.writeFileSync(path.join(ws, "mod", ".git"), "gitdir: ../.git/modules/mod\n")
      const out = ok(yield* withTools(config, invoke("shell", {
        command: `echo x > vendor/lib/.git/hooks/pre-commit; echo 'gitdir: ${outside}' > mod/.git; echo done`
      })))
      expect(String(out["stderr"])).toContain("Read-only file system")
      expect(fs.existsSync(path.join(ws, "vendor", "lib", ".git", "hooks", "pre-commit"))).toBe(false)
      expect(fs.readFileSync(path.join(ws, "mod", ".git"), "utf8")).toBe("gitdir: ../.git/modules/mod\n")
      cleanup()
    }))

  it.live("without a .git, what a call creates there is moved aside when it ends; nothing is made in the workspace to hold it", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const before = ok(yield* withTools({ workspace: ws, sandbox: "bwrap" }, invoke("shell", { command: "ls -A; echo listed" })))
      expect(before["stdout"]).toBe("listed\n")
      expect(before["moved_aside"]).toBeUndefined()
      const out = ok(yield* withTools({ workspace: ws, sandbox: "bwrap" }, invoke("shell", {
        command: "git init -q .; mkdir -p .git/hooks; echo x > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; echo made"
      })))
      expect(out["stdout"]).toBe("made\n")
      expect(out["moved_aside"]).toEqual([".git"])
      expect(fs.existsSync(path.join(ws, ".git"))).toBe(false)
      const entries = fs.readdirSync(ws)
      expect(entries).toHaveLength(1)
      expect(entries[0]).toMatch(/^\.git\.refused-by-rx-[0-9a-f]{8}$/)
      // A link planted there is moved, never followed.
      fs.rmSync(path.join(ws, entries[0] ?? ""), { recursive: true })
      const linked = ok(yield* withTools({ workspace: ws, sandbox: "bwrap" }, invoke("shell", { command: "ln -s /etc .git; echo linked" })))
      expect(linked["moved_aside"]).toEqual([".git"])
      expect(fs.existsSync(path.join(ws, ".git"))).toBe(false)
      expect(fs.existsSync("/etc/hostname") || fs.existsSync("/etc/passwd")).toBe(true)
      // Protection is the config's: without it, git init works and stays.
      const free = ok(yield* withTools({ workspace: ws, sandbox: "bwrap", protectedPaths: [] }, invoke("shell", { command: "git init -q . && echo init=$?" })))
      expect(free["stdout"]).toBe("init=0\n")
      expect(fs.existsSync(path.join(ws, ".git", "HEAD"))).toBe(true)
      cleanup()
    }))

  it.live("rx's database inside the workspace can be neither read, written nor removed; nothing is made to hold its missing siblings", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const db = path.join(ws, "rx.db")
      fs.writeFileSync(db, "secret log content")
      fs.writeFileSync(`${db}-wal`, "secret wal content")
      const hiddenPaths = ["", "-wal", "-shm", "-journal"].map((suffix) => `${db}${suffix}`)
      const out = ok(yield* withTools({ workspace: ws, sandbox: "bwrap", hiddenPaths }, invoke("shell", {
        command: "cat rx.db rx.db-wal; echo evil > rx.db; echo evil >> rx.db-wal; echo hot > rx.db-journal; rm -f rx.db rx.db-wal; mv rx.db x.db; ls -A"
      })))
      expect(String(out["stdout"])).not.toContain("secret")
      expect(String(out["stderr"])).toContain("Permission denied")
      expect(fs.readFileSync(db, "utf8")).toBe("secret log content")
      expect(fs.readFileSync(`${db}-wal`, "utf8")).toBe("secret wal content")
      // A missing sibling is not held (that would need a file made in the workspace): a planted
      // journal is the command's, and the SQLite store refuses to open a log beside one.
      expect(fs.readFileSync(`${db}-journal`, "utf8")).toBe("hot\n")
      expect(fs.existsSync(path.join(ws, "x.db"))).toBe(false)
      cleanup()
    }))

  it.live("a protected path that is a symbolic link refuses shell calls rather than pretending to hold it", () =>
    Effect.gen(function*() {
      const { cleanup, outside, ws } = makeDirs()
      fs.symlinkSync(outside, path.join(ws, ".git"))
      const failure = failed(yield* withTools({ workspace: ws, sandbox: "bwrap" }, invoke("shell", { command: "true" })))
      expect(failure.kind).toBe("fatal")
      expect(failure.message).toContain("symbolic link")
      cleanup()
    }))
})

describe("protected paths in the file tools", () => {
  const setup = () => {
    const dirs = makeDirs()
    git(dirs.ws, "init", "-q")
    fs.writeFileSync(path.join(dirs.ws, "rx.db"), "secret log content\n")
    fs.mkdirSync(path.join(dirs.ws, "sub", ".git"), { recursive: true })
    fs.writeFileSync(path.join(dirs.ws, "notes.txt"), "notes\n")
    return { ...dirs, config: { workspace: dirs.ws, sandbox: "none" as const, hiddenPaths: [path.join(dirs.ws, "rx.db")] } }
  }

  const refused = (failure: { readonly details?: unknown; readonly message: string }) => {
    expect((failure.details as Record<string, unknown> | undefined)?.["_tag"]).toBe("@rx/tools/PathRefused")
    return failure.message
  }

  it.live("write_file and edit_file into .git are refused, at any depth, in any case, through a link", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      fs.symlinkSync(".git/hooks", path.join(ws, "hooks"))
      for (const target of [".git/hooks/pre-commit", ".git/config", ".GIT/hooks/pre-commit", ".Git/config", "hooks/pre-commit", "sub/.git/config", `${ws}/.git/hooks/pre-commit`, ".git"]) {
        const message = refused(failed(yield* withTools(config, invoke("write_file", { path: target, content: "touch /tmp/pwned\n" }))))
        expect(message).toContain("may read but not change")
      }
      const current = fs.readFileSync(path.join(ws, ".git", "config"), "utf8")
      const edit = failed(yield* withTools(config, invoke("edit_file", {
        path: ".git/config",
        old_text: "[core]",
        new_text: "[core]\n\tfsmonitor = touch /tmp/pwned",
        expected_sha256: sha256(current)
      })))
      expect(refused(edit)).toContain(".git")
      expect(fs.existsSync(path.join(ws, ".git", "hooks", "pre-commit"))).toBe(false)
      expect(fs.existsSync(path.join(ws, ".GIT"))).toBe(false)
      expect(fs.readFileSync(path.join(ws, ".git", "config"), "utf8")).toBe(current)
      // Reading .git is allowed.
      const read = ok(yield* withTools(config, invoke("read_file", { path: ".git/HEAD" })))
      expect(String(read["content"])).toContain("ref: refs/heads/")
      // Without the protection, the same write goes through: the refusal above is the guard's.
      ok(yield* withTools({ ...config, protectedPaths: [] }, invoke("write_file", { path: ".git/info/note", content: "allowed\n" })))
      cleanup()
    }))

  it.live("a hidden file is refused to read_file, write_file and edit_file, and left out of list_dir and search_text", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      for (const target of ["rx.db", "./RX.DB", `${ws}/rx.db`]) {
        expect(refused(failed(yield* withTools(config, invoke("read_file", { path: target }))))).toContain("hidden")
      }
      expect(refused(failed(yield* withTools(config, invoke("write_file", { path: "rx.db", content: "x\n", expected_sha256: sha256("secret log content\n") }))))).toContain("hidden")
      expect(refused(failed(yield* withTools(config, invoke("edit_file", { path: "rx.db", old_text: "secret", new_text: "x", expected_sha256: sha256("secret log content\n") }))))).toContain("hidden")
      fs.symlinkSync("rx.db", path.join(ws, "alias"))
      expect(refused(failed(yield* withTools(config, invoke("read_file", { path: "alias" }))))).toContain("hidden")
      const listed = ok(yield* withTools(config, invoke("list_dir", {})))
      expect(JSON.stringify(listed)).not.toContain("\"rx.db\"")
      expect(JSON.stringify(listed)).toContain("notes.txt")
      const searched = ok(yield* withTools(config, invoke("search_text", { pattern: "secret|notes" })))
      expect(searched["matches"]).toEqual([{ path: "notes.txt", line: 1, text: "notes" }])
      expect(searched["files_searched"]).toBe(1)
      expect(fs.readFileSync(path.join(ws, "rx.db"), "utf8")).toBe("secret log content\n")
      cleanup()
    }))
})

/** Modes to test the limits in: `none` always, `bwrap` when it works. */
const modes = unavailable === undefined ? (["none", "bwrap"] as const) : (["none"] as const)

describe.each(modes)("resource limits, sandbox %s", (mode) => {
  const setup = () => {
    const dirs = makeDirs()
    return { ...dirs, config: { workspace: dirs.ws, sandbox: mode, shellGraceMs: 500 } }
  }

  it.live("every output records the limits it ran under", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const out = ok(yield* withTools(config, invoke("shell", { command: "ulimit -d; ulimit -t; ulimit -f; ulimit -c" })))
      const limits = out["limits"] as Record<string, unknown>
      expect(limits["max_memory_bytes"]).toBe(4 * 1024 ** 3)
      expect(limits["max_cpu_seconds"]).toBe(600)
      expect(limits["max_file_bytes"]).toBe(1024 ** 3)
      if (cgroups !== undefined || !root) expect(limits["max_processes"]).toBe(1024)
      // What the command itself sees: KiB of data, seconds, 512-byte blocks, no core files.
      expect(out["stdout"]).toBe(`${4 * 1024 * 1024}\n600\n${2 * 1024 * 1024}\n0\n`)
      cleanup()
    }))

  it.live.skipIf(root && cgroups === undefined)("starting more processes than shellMaxProcesses fails", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const command = "for i in $(seq 120); do sleep 3 & done; echo all-started"
      const limited = ok(yield* withTools({ ...config, shellMaxProcesses: 40 }, invoke("shell", { command })))
      expect(limited["stdout"]).not.toContain("all-started")
      expect(String(limited["stderr"])).toMatch(/Cannot fork|Resource temporarily unavailable/)
      expect((limited["limits"] as Record<string, unknown>)["max_processes"]).toBe(40)
      // The same command under the default limit starts them all.
      const free = ok(yield* withTools(config, invoke("shell", { command })))
      expect(free["stdout"]).toBe("all-started\n")
      cleanup()
    }), 30_000)

  it.live("allocating more memory than shellMaxMemoryBytes fails; less works", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const limited = { ...config, shellMaxMemoryBytes: 64 * 1024 * 1024 }
      // tail keeps a whole line in memory: 300 MB without a newline is one allocation that grows.
      const big = ok(yield* withTools(limited, invoke("shell", { command: "head -c 300M /dev/zero | tail | wc -c; echo tail=$?" })))
      expect(String(big["stderr"])).toContain("memory exhausted")
      const small = ok(yield* withTools(limited, invoke("shell", { command: "head -c 8M /dev/zero | tail | wc -c" })))
      expect(small["stdout"]).toBe(`${8 * 1024 * 1024}\n`)
      cleanup()
    }), 30_000)

  it.live("writing a file larger than shellMaxFileBytes fails at the limit", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const out = ok(yield* withTools({ ...config, shellMaxFileBytes: 1024 * 1024 }, invoke("shell", {
        command: "head -c 3M /dev/zero > big.bin; echo head=$?; head -c 512K /dev/zero > small.bin; echo small=$?"
      })))
      // SIGXFSZ ends the writer: 128 + 25.
      expect(String(out["stdout"])).toContain("head=153")
      expect(String(out["stdout"])).toContain("small=0")
      expect(fs.statSync(path.join(ws, "big.bin")).size).toBe(1024 * 1024)
      expect(fs.statSync(path.join(ws, "small.bin")).size).toBe(512 * 1024)
      cleanup()
    }), 30_000)

  it.live("a busy loop is ended by shellMaxCpuSeconds, long before the timeout", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const started = Date.now()
      const out = ok(yield* withTools({ ...config, shellMaxCpuSeconds: 1 }, invoke("shell", { command: "sh -c 'while :; do :; done'; echo loop=$?", timeout_ms: 30_000 })))
      expect(out["timed_out"]).toBe(false)
      // SIGXCPU (128 + 24) or SIGKILL (128 + 9).
      expect(String(out["stdout"])).toMatch(/loop=(152|137)/)
      expect(Date.now() - started).toBeLessThan(15_000)
      cleanup()
    }), 30_000)

  it.live("an endless flood of output is stopped once it passes shellMaxOutputBytes", () =>
    Effect.gen(function*() {
      const { cleanup, config } = setup()
      const id = tag()
      const started = Date.now()
      const out = ok(yield* withTools({ ...config, shellMaxOutputBytes: 4 * 1024 * 1024 }, invoke("shell", { command: `exec yes ${id}`, timeout_ms: 60_000 })))
      expect(out["output_limited"]).toBe(true)
      expect(out["timed_out"]).toBe(false)
      expect(Number(out["stdout_bytes"])).toBeGreaterThan(4 * 1024 * 1024)
      // Long before the 60 s timeout.
      expect(Date.now() - started).toBeLessThan(40_000)
      expect(alive(`yes ${id}`)).toEqual([])
      // Under the threshold nothing is stopped.
      const quiet = ok(yield* withTools(config, invoke("shell", { command: "head -c 1000000 /dev/zero | wc -c" })))
      expect(quiet["output_limited"]).toBe(false)
      cleanup()
    }), 30_000)
})

describe.skipIf(unavailable !== undefined)("the sandbox's /tmp", () => {
  it.live("holds at most shellMaxMemoryBytes, since it lives in memory", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const out = ok(yield* withTools({ workspace: ws, sandbox: "bwrap", shellMaxMemoryBytes: 32 * 1024 * 1024 }, invoke("shell", {
        command: "head -c 20M /dev/zero > /tmp/a; echo a=$?; head -c 20M /dev/zero > /tmp/b; echo b=$?"
      })))
      expect(String(out["stdout"])).toMatch(/a=0\nb=[1-9]/)
      expect(String(out["stderr"])).toContain("No space left on device")
      cleanup()
    }))
})

describe.skipIf(unavailable !== undefined || (root && cgroups === undefined))("a fork bomb", () => {
  it.live("is held to shellMaxProcesses by the limit until the command ends, then killed entirely", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const config = { workspace: ws, sandbox: "bwrap" as const, shellMaxProcesses: 64, shellGraceMs: 200 }
      // Never run a bomb if the limit does not hold.
      const probe = ok(yield* withTools(config, invoke("shell", { command: "for i in $(seq 100); do sleep 2 & done; echo all-started" })))
      expect(probe["stdout"]).not.toContain("all-started")
      const id = tag()
      let peak = 0
      const sampler = setInterval(() => {
        peak = Math.max(peak, alive(`bomb${id}`).length)
      }, 20)
      const out = yield* withTools(config, invoke("shell", { command: `bomb${id}() { bomb${id} | bomb${id} & }; bomb${id}; sleep 3`, timeout_ms: 20_000 })).pipe(
        Effect.ensuring(Effect.sync(() => clearInterval(sampler)))
      )
      const output = ok(out)
      expect(output["timed_out"]).toBe(false)
      // The bomb ran into the limit (its forks failed), and never got past it. How many processes
      // the sampler catches at once depends on the machine's load, so only the ceiling is exact.
      expect(String(output["stderr"])).toMatch(/fork|resource temporarily unavailable/i)
      expect(peak).toBeGreaterThan(0)
      expect(peak).toBeLessThanOrEqual(64)
      for (let i = 0; i < 50 && alive(`bomb${id}`).length > 0; i++) yield* Effect.sleep("100 millis")
      expect(alive(`bomb${id}`)).toEqual([])
      cleanup()
    }), 60_000)
})

describe.skipIf(cgroups === undefined)("sandbox none, with a cgroup per call", () => {
  it.live("a process that left with setsid and cleared its environment does not outlive the call", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const id = tag()
      const out = ok(yield* withTools({ workspace: ws, sandbox: "none", shellGraceMs: 300 }, invoke("shell", {
        command: `setsid env -i sh -c 'sleep 60.${id}' > /dev/null 2>&1 & echo "$RX_SHELL_CALL"`
      })))
      const marker = String(out["stdout"]).trim()
      expect(marker).toMatch(/^[0-9a-f]{24}$/)
      for (let i = 0; i < 50 && alive(`60.${id}`).length > 0; i++) yield* Effect.sleep("100 millis")
      expect(alive(`60.${id}`)).toEqual([])
      // The call's cgroup is removed.
      expect(fs.readdirSync(cgroups?.dir ?? "/").filter((name) => name.startsWith(`rx-shell-${marker}`))).toEqual([])
      cleanup()
    }))
})

describe.skipIf(unavailable !== undefined)("a workspace held by identity", () => {
  /** Two goals' tools at once: one on `root`, one on `root/b` inside it. */
  const nested = <A, E>(body: (outer: Context.Context<ToolRegistry.ToolRegistry>, inner: Context.Context<ToolRegistry.ToolRegistry>, dirs: { root: string; b: string }) => Effect.Effect<A, E>) =>
    Effect.scoped(Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const b = path.join(ws, "b")
      fs.mkdirSync(b)
      yield* Effect.addFinalizer(() => Effect.sync(cleanup))
      const outer = yield* Layer.build(Builtins.layer({ workspace: ws, sandbox: "bwrap" }))
      const inner = yield* Layer.build(Builtins.layer({ workspace: b, sandbox: "bwrap" }))
      return yield* body(outer, inner, { root: ws, b })
    }))

  it.live("a goal whose folder another goal swaps for a link to / gets a recorded failure, never a mount of /", () =>
    nested((outer, inner, { b, root }) =>
      Effect.gen(function*() {
        const inB = (tool: string, input: unknown) => Effect.provide(invoke(tool, input), inner)
        expect(ok(yield* inB("shell", { command: "echo one > one.txt; echo ok" }))["stdout"]).toBe("ok\n")
        // Goal A, working on the folder that holds B's, swaps B's folder for a link to /.
        const swap = ok(yield* Effect.provide(invoke("shell", { command: "mv b b.old && ln -s / b && echo swapped" }), outer))
        expect(swap["stdout"]).toBe("swapped\n")
        const marker = `rx-escape-${tag()}`
        for (const [tool, input] of [
          ["shell", { command: `touch /${marker}; touch ${marker}; cat /etc/hostname` }],
          ["write_file", { path: marker, content: "x" }],
          ["read_file", { path: "etc/hostname" }],
          ["list_dir", {}]
        ] as const) {
          const failure = failed(yield* inB(tool, input))
          expect(failure.kind).toBe("fatal")
          expect(failure.message).toContain(`the workspace ${b} is no longer the folder this goal started in`)
          expect(failure.message).toContain("symbolic link")
        }
        expect(fs.existsSync(`/${marker}`)).toBe(false)
        expect(fs.readdirSync(path.join(root, "b.old"))).toEqual(["one.txt"])
        // A folder put back in its place is another folder: still refused.
        fs.unlinkSync(b)
        fs.mkdirSync(b)
        expect(failed(yield* inB("shell", { command: "true" })).message).toContain("another folder")
        // The folder itself, moved back, is the same folder again.
        fs.rmdirSync(b)
        fs.renameSync(path.join(root, "b.old"), b)
        expect(ok(yield* inB("shell", { command: "cat one.txt" }))["stdout"]).toBe("one\n")
      })
    ))

  it.live("a swap while a call runs cannot move the running command: it keeps the folder it was started on", () =>
    nested((outer, inner, { b, root }) =>
      Effect.gen(function*() {
        const marker = `rx-escape-${tag()}`
        const running = yield* Effect.fork(Effect.provide(
          invoke("shell", { command: `touch started; while [ ! -e "$PWD/go" ]; do sleep 0.05; done; touch "$PWD/${marker}" "/${marker}" 2>/dev/null; ls "$PWD"` }),
          inner
        ))
        while (!fs.existsSync(path.join(b, "started"))) yield* Effect.sleep("20 millis")
        ok(yield* Effect.provide(invoke("shell", { command: "mv b b.old && ln -s / b && touch b.old/go" }), outer))
        const out = ok(yield* Fiber.join(running))
        expect(String(out["stdout"])).toContain(marker)
        expect(fs.existsSync(path.join(root, "b.old", marker))).toBe(true)
        expect(fs.existsSync(`/${marker}`)).toBe(false)
      })
    ))
})

describe.skipIf(unavailable !== undefined || !root)("as root", () => {
  it.live("sandboxed commands run as an unprivileged uid and read no root-only file", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const out = ok(yield* withTools({ workspace: ws, sandbox: "bwrap" }, invoke("shell", {
        command: "id -u; id -g; cat /etc/shadow | wc -c; cat /etc/gshadow | wc -c; ls /etc/ssl/private | wc -l; touch mine; echo wrote"
      })))
      expect(String(out["stdout"]).split("\n")).toEqual(["65534", "65534", "0", "0", "0", "wrote", ""])
      // What it writes in the workspace is still the user's (root's), as rx's own writes are.
      expect(fs.statSync(path.join(ws, "mine")).uid).toBe(0)
      expect(fs.readFileSync("/etc/shadow", "utf8").length).toBeGreaterThan(0)
      cleanup()
    }))
})

describe.skipIf(unavailable !== undefined)("a crash during a sandboxed call", () => {
  it.live("what the cut call created at a protected path is moved aside by recovery; nothing of rx's stays", () =>
    Effect.gen(function*() {
      const { cleanup, ws } = makeDirs()
      const callId = callIdOf("cut")
      // A stand-in for rx, killed with SIGKILL in the middle of a call that made a .git.
      const script = `
        import { ToolRegistry } from "@rx/kernel"
        import { Builtins } from "@rx/tools"
        import { Effect, Either } from "effect"
        const registry = await Effect.runPromise(Effect.scoped(Effect.provide(ToolRegistry.ToolRegistry, Builtins.layer({ workspace: ${JSON.stringify(ws)}, sandbox: "bwrap" }))))
        const call = Either.getOrThrow(registry.prepare({ callId: ${JSON.stringify(callId)}, tool: "shell", input: { command: "git init -q .; touch started; sleep 60" } }))
        await Effect.runPromise(call.run)
      `
      const rx = spawn(process.execPath, ["--input-type=module", "-e", script], { cwd: path.resolve(import.meta.dirname, ".."), stdio: "ignore" })
      for (let i = 0; i < 600 && !fs.existsSync(path.join(ws, "started")); i++) yield* Effect.sleep("50 millis")
      expect(fs.existsSync(path.join(ws, ".git", "HEAD"))).toBe(true)
      rx.kill("SIGKILL")
      yield* Effect.promise(() => new Promise((resolve) => rx.once("exit", resolve)))
      const recovered = yield* withTools({ workspace: ws, sandbox: "bwrap" }, Effect.flatMap(ToolRegistry.ToolRegistry, (registry) =>
        Either.getOrThrow(registry.prepare({ callId, tool: "shell", input: { command: "anything" } })).recover))
      expect(recovered).toEqual(Option.none())
      expect(fs.existsSync(path.join(ws, ".git"))).toBe(false)
      expect(fs.readdirSync(ws).sort()).toEqual([expect.stringMatching(/^\.git\.refused-by-rx-[0-9a-f]{8}$/), "started"])
      cleanup()
    }))
})
