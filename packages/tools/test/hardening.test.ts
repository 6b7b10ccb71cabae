/**
 * The file tools under hostile conditions: catastrophic patterns, FIFOs and sockets swapped in,
 * text copied from cut views, errno classification, concurrent appenders, crashes during a write
 * and writes that would produce huge files. Real temp folders, real processes, real time.
 */
import { describe, expect, it } from "@effect/vitest"
import { Tool, ToolRegistry } from "@rx/kernel"
import { Duration, Effect, Either, Fiber, Option, Schema } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as net from "node:net"
import * as path from "node:path"
import { Workspace } from "../src/index.js"
import * as Errors from "../src/internal/errors.js"
import * as Text from "../src/internal/text.js"
import { failed, invoke, makeDirs, ok, sha256, withTools } from "./helpers.js"

const setup = () => {
  const dirs = makeDirs()
  return { ...dirs, config: { workspace: dirs.ws, sandbox: "none" as const } }
}

/** Invoke a tool with a given call id. */
const call = (tool: string, input: unknown, callId: string) =>
  Effect.flatMap(ToolRegistry.ToolRegistry, (registry) => ToolRegistry.invoke(registry, { callId, tool, input }))

/** What the kernel gets on resume for a call that was started and has no outcome. */
const recover = (tool: string, input: unknown, callId: string) =>
  Effect.flatMap(ToolRegistry.ToolRegistry, (registry) =>
    Either.match(registry.prepare({ callId, tool, input }), {
      onLeft: (reason) => Effect.dieMessage(reason),
      onRight: (prepared) => prepared.recover
    }))

/** Milliseconds an Effect takes, with its result. */
const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const start = Date.now()
    const result = yield* effect
    return { result, ms: Date.now() - start }
  })

describe("search_text: linear-time matching, cancellation, time budget", () => {
  it.live("a catastrophic pattern on a long line returns quickly", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      // A backtracking engine takes 2^40 steps on the first line; RE2 takes 41.
      fs.writeFileSync(path.join(ws, "a.txt"), `${"a".repeat(40)}!\n${"a".repeat(40)}\n${"a".repeat(100_000)}!\n`)
      const { ms, result } = yield* timed(withTools(config, invoke("search_text", { pattern: "^(a+)+$" })))
      // A backtracking engine would take hours.
      expect(ms).toBeLessThan(30_000)
      const out = ok(result)
      expect(out["matches"]).toEqual([{ path: "a.txt", line: 2, text: "a".repeat(40) }])
      expect(out["timed_out"]).toBe(false)
      cleanup()
    }), 60_000)

  it.effect("refuses backreferences and lookaround, naming what is unsupported", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      fs.writeFileSync(path.join(ws, "a.txt"), "abab\n")
      const cases: ReadonlyArray<readonly [string, string]> = [
        ["(ab)\\1", "backreferences"],
        ["(?<x>ab)\\k<x>", "backreferences"],
        ["a(?=b)", "lookahead"],
        ["a(?!b)", "lookahead"],
        ["(?<=a)b", "lookbehind"],
        ["(?<!a)b", "lookbehind"],
        ["a++", "possessive"],
        ["(", "RE2"]
      ]
      for (const [pattern, why] of cases) {
        const failure = failed(yield* withTools(config, invoke("search_text", { pattern })))
        expect(failure.kind, pattern).toBe("recoverable")
        expect(failure.message, pattern).toContain("not a valid RE2 regular expression")
        expect(failure.message, pattern).toContain(why)
      }
      // What RE2 does support: classes, named groups, case folding, word boundaries.
      const found = ok(yield* withTools(config, invoke("search_text", { pattern: "(?i)^(?P<x>AB)\\w+\\b" })))
      expect(found["matches"]).toEqual([{ path: "a.txt", line: 1, text: "abab" }])
      cleanup()
    }))

  it.live("interrupting a long search over many large files lands promptly", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      // 48 files of ~1 MB (a second or more of searching), each line one that backtracks exponentially in JavaScript.
      const line = `${"x".repeat(60)}\n`
      const body = line.repeat(Math.floor(1_000_000 / line.length))
      for (let i = 0; i < 48; i++) fs.writeFileSync(path.join(ws, `f${String(i).padStart(2, "0")}.txt`), body)
      const fiber = yield* Effect.fork(withTools(config, invoke("search_text", { pattern: "(x+x+)+[yz]" })))
      yield* Effect.sleep(Duration.millis(100))
      // Still running: the interruption below is tested for real.
      expect(fiber.unsafePoll()).toBe(null)
      const { ms } = yield* timed(Fiber.interrupt(fiber))
      expect(ms).toBeLessThan(1_000)
      cleanup()
    }), 60_000)

  it.live("stops at the time budget with partial results flagged", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      // 60 files of 100,000 lines: seconds of matching, stopped after 300 ms.
      for (let i = 0; i < 60; i++) fs.writeFileSync(path.join(ws, `f${String(i).padStart(2, "0")}.txt`), "needle\n".repeat(100_000))
      const { ms, result } = yield* timed(
        withTools({ ...config, searchTimeoutMs: 300, maxMatches: 10_000_000 }, invoke("search_text", { pattern: "ne+dle" }))
      )
      const out = ok(result)
      expect(out["timed_out"]).toBe(true)
      expect(out["truncated"]).toBe(true)
      expect(out["files_searched"]).toBeLessThan(60)
      expect((out["matches"] as Array<unknown>).length).toBeGreaterThan(0)
      expect(ms).toBeLessThan(3_000)
      const one = ok(yield* withTools({ ...config, maxMatches: 10_000_000 }, invoke("search_text", { pattern: "ne+dle", path: "f00.txt" })))
      expect(one["timed_out"]).toBe(false)
      expect((one["matches"] as Array<unknown>).length).toBe(100_000)
      cleanup()
    }), 60_000)
})

describe("FIFOs, sockets and devices", () => {
  it.live("every file tool refuses a FIFO and a socket promptly, recoverably", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      execFileSync("mkfifo", [path.join(ws, "pipe")])
      const server = net.createServer()
      yield* Effect.async<void>((resume) => {
        server.listen(path.join(ws, "sock"), () => resume(Effect.void))
      })
      try {
        for (const [name, kind] of [["pipe", "FIFO"], ["sock", "socket"]] as const) {
          const calls = [
            ["read_file", { path: name }],
            ["write_file", { path: name, content: "x\n" }],
            ["edit_file", { path: name, old_text: "a", new_text: "b", expected_sha256: "0".repeat(64) }],
            ["search_text", { pattern: "x", path: name }]
          ] as const
          for (const [tool, input] of calls) {
            const { ms, result } = yield* timed(withTools(config, invoke(tool, input)))
            // An open that waited would never return.
            expect(ms, `${tool} ${name}`).toBeLessThan(30_000)
            const failure = failed(result)
            expect(failure.kind, `${tool} ${name}`).toBe("recoverable")
            expect(failure.message, `${tool} ${name}`).toContain(kind)
          }
        }
        // A search of the folder passes them by.
        const found = ok(yield* withTools(config, invoke("search_text", { pattern: "x" })))
        expect(found["matches"]).toEqual([])
      } finally {
        server.close()
      }
      cleanup()
    }), 60_000)

  it.live("a device is refused: a link to /dev/zero, and a device node inside the workspace", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      fs.symlinkSync("/dev/zero", path.join(ws, "zero-link"))
      const link = failed(yield* withTools(config, invoke("read_file", { path: "zero-link" })))
      expect(link.kind).toBe("recoverable")
      expect(link.message).toContain("symbolic link")
      // A device node needs root (CAP_MKNOD); where it cannot be made, that part is skipped.
      const made = Either.try(() => execFileSync("mknod", [path.join(ws, "zero"), "c", "1", "5"], { stdio: "ignore" }))
      if (Either.isRight(made)) {
        for (const [tool, input] of [["read_file", { path: "zero" }], ["write_file", { path: "zero", content: "x" }]] as const) {
          const { ms, result } = yield* timed(withTools(config, invoke(tool, input)))
          expect(ms).toBeLessThan(30_000)
          const failure = failed(result)
          expect(failure.kind).toBe("recoverable")
          expect(failure.message).toContain("character device")
        }
      }
      cleanup()
    }), 60_000)

  it.live("a FIFO swapped in and out during reads and writes never blocks them", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      fs.writeFileSync(path.join(ws, "target"), "inside\n")
      execFileSync("mkfifo", [path.join(ws, "p")])
      // Another process swaps, as fast as it can, the file for the FIFO and back.
      const script = `
        const fs = require("node:fs")
        process.chdir(${JSON.stringify(ws)})
        const attempt = (f) => { try { f() } catch {} }
        // Ends by itself, should the test be stuck.
        const end = Date.now() + 60_000
        while (Date.now() < end) {
          attempt(() => fs.renameSync("target", "r"))
          attempt(() => fs.renameSync("p", "target"))
          attempt(() => fs.renameSync("target", "p"))
          attempt(() => fs.renameSync("r", "target"))
        }`
      const swapper = spawn(process.execPath, ["-e", script], { stdio: "ignore", detached: true })
      const kinds = new Map<string, number>()
      let slowest = 0
      try {
        for (let i = 0; i < 300; i++) {
          const input = i % 2 === 0
            ? ["read_file", { path: "target" }] as const
            : ["write_file", { path: "target", content: "inside\n", expected_sha256: sha256("inside\n") }] as const
          const { ms, result } = yield* timed(withTools(config, invoke(input[0], input[1])).pipe(
            Effect.timeout(Duration.seconds(5)),
            Effect.option
          ))
          slowest = Math.max(slowest, ms)
          expect(Option.isSome(result), `${input[0]} blocked`).toBe(true)
          if (Option.isNone(result)) break
          const outcome = result.value
          const key = outcome._tag === "Success" ? "ok" : outcome._tag === "Waiting" ? "waiting" : `${outcome.error.kind}:${String((outcome.error.details as { _tag?: string } | undefined)?._tag)}`
          kinds.set(key, (kinds.get(key) ?? 0) + 1)
        }
      } finally {
        process.kill(-(swapper.pid ?? 0), "SIGKILL")
        // Were a read blocked in open(2), a writer releases it.
        for (const name of ["p", "target"]) {
          Either.try(() => fs.closeSync(fs.openSync(path.join(ws, name), fs.constants.O_WRONLY | fs.constants.O_NONBLOCK)))
        }
      }
      expect(slowest).toBeLessThan(30_000)
      // Every failure was one the model can act on; both outcomes happened, so the race was real.
      for (const key of kinds.keys()) expect(key === "ok" || key.startsWith("recoverable:"), key).toBe(true)
      expect(kinds.get("ok") ?? 0).toBeGreaterThan(0)
      expect([...kinds.keys()].some((key) => key !== "ok")).toBe(true)
      expect(fs.readFileSync(path.join(ws, fs.existsSync(path.join(ws, "r")) ? "r" : "target"), "utf8")).toBe("inside\n")
      cleanup()
    }), 120_000)
})

describe("placeholders and rx's own cut markers", () => {
  const kernelMarker = "[... 3000 characters omitted ...]" // packages/kernel/src/internal/json.ts `truncate`

  it.live("text copied from a cut view is refused even with allow_placeholder: the kernel's and shell's markers", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      // shell's real output cap, copied back into a file.
      const shell = ok(yield* withTools({ ...config, shellOutputBytes: 256 }, invoke("shell", { command: "seq 1 5000" })))
      const stdout = String(shell["stdout"])
      expect(stdout).toMatch(/\[\.\.\. \d+ bytes dropped \.\.\.\]/)
      const original = "const a = 1\nconst b = 2\n"
      fs.writeFileSync(path.join(ws, "m.ts"), original)
      const cut = `const a = 1\n${kernelMarker}\nconst b = 2\n`
      for (const content of [stdout, cut, `const a = 1 // ${kernelMarker} const z = 9\nconst b = 2\n`]) {
        for (const allow of [undefined, true]) {
          const created = failed(yield* withTools(config, invoke("write_file", { path: "new.txt", content, allow_placeholder: allow })))
          expect(created.kind).toBe("recoverable")
          expect(created.message).toContain("marker rx puts where it cut text")
          const overwrite = failed(yield* withTools(config, invoke("write_file", {
            path: "m.ts",
            content: content + original,
            expected_sha256: sha256(original),
            allow_placeholder: allow
          })))
          expect(overwrite.message).toContain("marker rx puts where it cut text")
          const edit = failed(yield* withTools(config, invoke("edit_file", {
            path: "m.ts",
            old_text: "const b = 2\n",
            new_text: content,
            expected_sha256: sha256(original),
            allow_placeholder: allow
          })))
          expect(edit.message).toContain("marker rx puts where it cut text")
        }
      }
      expect(fs.existsSync(path.join(ws, "new.txt"))).toBe(false)
      expect(fs.readFileSync(path.join(ws, "m.ts"), "utf8")).toBe(original)
      // A file that already holds such a line (rx's own tests do) can still be rewritten.
      const holding = `expect(x).toBe("${kernelMarker}")\n${kernelMarker}\n`
      fs.writeFileSync(path.join(ws, "t.ts"), holding)
      ok(yield* withTools(config, invoke("write_file", { path: "t.ts", content: holding + "more()\n", expected_sha256: sha256(holding) })))
      cleanup()
    }), 60_000)

  const refused = [
    "// ... existing code ...",
    "// ...existing code...",
    "# ... rest of the file ...",
    "<!-- unchanged -->",
    "<!-- ... -->",
    "{/* ... */}",
    "(truncated)",
    "[truncated]",
    "<content truncated>",
    "[content truncated]",
    "... (42 more lines)",
    "... 42 lines omitted ...",
    "[... 42 more lines ...]",
    "[rest of file unchanged]",
    "// (unchanged)",
    "/* ...snip... */",
    "// same as before",
    "# ... (rest unchanged)",
    "// ... other methods ...",
    "// lines 20-80 unchanged",
    "// helpers omitted for brevity",
    "-- rest of the query",
    "// keep existing code",
    "[...]",
    "// ... rest of the code unchanged",
    "..."
  ]

  const accepted = [
    "f(...args)",
    "const x = [...y]",
    "{...props}",
    "// unchanged behaviour is tested below",
    "// the rest is up to the caller",
    "# Rest of the world",
    "return (truncate(x))",
    "[a, b, c]",
    "<T>",
    "Loading...",
    "// TODO: handle the truncated case"
  ]

  it("recognizes the placeholders models write, and leaves ordinary code alone", () => {
    for (const line of refused) expect(Text.placeholderLines(`a\n  ${line}\nb\n`, "x.ts"), line).toEqual([line])
    for (const line of accepted) expect(Text.placeholderLines(`${line}\n`, "x.ts"), line).toEqual([])
    // Python stubs use a bare ellipsis.
    expect(Text.placeholderLines("def f(): ...\n    ...\n[...]\n", "x.pyi")).toEqual([])
  })

  it.effect("write_file and edit_file refuse each placeholder unless allowed", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const original = "function a() {\n  return 1\n}\n"
      fs.writeFileSync(path.join(ws, "m.ts"), original)
      for (const line of refused) {
        const write = failed(yield* withTools(config, invoke("write_file", {
          path: "m.ts",
          content: `${original}${line}\n`,
          expected_sha256: sha256(original)
        })))
        expect(write.message, line).toContain("placeholder")
        const edit = failed(yield* withTools(config, invoke("edit_file", {
          path: "m.ts",
          old_text: "  return 1\n",
          new_text: `  return 2\n  ${line}\n`,
          expected_sha256: sha256(original)
        })))
        expect(edit.message, line).toContain("placeholder")
      }
      expect(fs.readFileSync(path.join(ws, "m.ts"), "utf8")).toBe(original)
      ok(yield* withTools(config, invoke("write_file", {
        path: "m.ts",
        content: `${original}(truncated)\n`,
        expected_sha256: sha256(original),
        allow_placeholder: true
      })))
      cleanup()
    }))
})

describe("errno classification", () => {
  it.effect("a name over 255 bytes, a file used as a folder and a folder used as a file are recoverable", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      fs.writeFileSync(path.join(ws, "f.txt"), "x\n")
      fs.mkdirSync(path.join(ws, "dir"))
      const long = "n".repeat(300)
      const cases: ReadonlyArray<readonly [string, unknown]> = [
        ["read_file", { path: long }],
        ["read_file", { path: `dir/${long}/x.txt` }],
        ["write_file", { path: long, content: "x" }],
        ["write_file", { path: `dir/${long}/x.txt`, content: "x" }],
        ["edit_file", { path: long, old_text: "a", new_text: "b", expected_sha256: "0".repeat(64) }],
        ["list_dir", { path: long }],
        ["find_files", { pattern: "*", path: long }],
        ["search_text", { pattern: "x", path: long }],
        ["read_file", { path: "f.txt/x.txt" }],
        ["write_file", { path: "f.txt/x.txt", content: "x" }],
        ["list_dir", { path: "f.txt" }],
        ["read_file", { path: "dir" }],
        ["write_file", { path: "dir", content: "x" }],
        ["edit_file", { path: "dir", old_text: "a", new_text: "b", expected_sha256: "0".repeat(64) }]
      ]
      for (const [tool, input] of cases) {
        const failure = failed(yield* withTools(config, invoke(tool, input)))
        expect(failure.kind, `${tool} ${JSON.stringify(input).slice(0, 60)}`).toBe("recoverable")
      }
      const named = failed(yield* withTools(config, invoke("write_file", { path: long, content: "x" })))
      expect(named.message).toContain("shorter")
      expect(named.details).toMatchObject({ _tag: "@rx/tools/FileSystemFailure", code: "ENAMETOOLONG" })
      cleanup()
    }))

  it("the table: what the model can route around is recoverable; a broken environment is fatal", () => {
    for (const code of ["ENOENT", "ENAMETOOLONG", "ELOOP", "ENOTDIR", "EISDIR", "EEXIST", "ENOTEMPTY", "EINVAL", "EACCES", "EPERM", "EBUSY", "ETXTBSY", "EFBIG", "EXDEV", "ENXIO"]) {
      expect(Errors.classifyErrno(code).recoverable, code).toBe(true)
    }
    for (const code of ["EROFS", "ENOSPC", "EDQUOT", "EIO", "EMFILE", "ENFILE", "EBADF", "ESOMETHINGNEW"]) {
      expect(Errors.classifyErrno(code).recoverable, code).toBe(false)
    }
    for (const entry of Object.values(Errors.errnoTable)) expect(entry.why.length).toBeGreaterThan(10)
    const failure = (code: string) =>
      new Workspace.FileSystemFailure({ path: "a", operation: "open", reason: "Unknown", detail: `${code}: x`, code })
    // The outcome the kernel records for a tool failing with it.
    const outcome = (code: string) =>
      Effect.runSync(Tool.make({
        name: "t",
        description: "",
        input: Schema.Struct({}),
        output: Schema.Struct({}),
        idempotent: true,
        execute: () => Effect.fail(Errors.fromWorkspace(failure(code)))
      }).run({}, { callId: "c" }))
    expect(outcome("EACCES")).toMatchObject({ error: { kind: "recoverable" } })
    expect(JSON.stringify(outcome("EACCES"))).toContain("choose a path")
    expect(outcome("EPERM")).toMatchObject({ error: { kind: "recoverable" } })
    expect(outcome("ENOSPC")).toMatchObject({ error: { kind: "fatal" } })
    expect(JSON.stringify(outcome("ENOSPC"))).toContain("disk is full")
    expect(outcome("EROFS")).toMatchObject({ error: { kind: "fatal" } })
    expect(outcome("EIO")).toMatchObject({ error: { kind: "fatal" } })
  })
})

describe("edit_file beside a concurrent appender", () => {
  it.live("every edit succeeds without losing an appended line, is refused as stale, or reports the one write it could not keep", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const file = path.join(ws, "log.txt")
      fs.writeFileSync(file, "version: 0\n")
      const appends = 600
      // Appends a line every 5 ms, each with its own open/write/close, as `echo >>` would.
      const script = `
        const fs = require("node:fs")
        const sleep = new Int32Array(new SharedArrayBuffer(4))
        for (let i = 0; i < ${appends}; i++) {
          fs.appendFileSync(${JSON.stringify(file)}, "append " + i + "\\n")
          Atomics.wait(sleep, 0, 0, 5)
        }`
      const appender = spawn(process.execPath, ["-e", script], { stdio: "ignore" })
      const exited = Effect.async<void>((resume) => {
        if (appender.exitCode !== null) resume(Effect.void)
        else appender.once("exit", () => resume(Effect.void))
      })
      let version = 0
      let succeeded = 0
      let stale = 0
      // An append that opened the old file just before the rename and wrote after it, while the
      // next append already reached the new file: POSIX has no compare-and-swap rename, so that
      // write cannot be put back. The edit then reports it (its content stays) and nothing else.
      let lost = 0
      // One registry for the whole loop, so that a read and the edit after it are close.
      yield* withTools(config, Effect.gen(function*() {
        while (appender.exitCode === null) {
          const read = ok(yield* invoke("read_file", { path: "log.txt", limit: 1 }))
          const outcome = yield* invoke("edit_file", {
            path: "log.txt",
            old_text: `version: ${version}\n`,
            new_text: `version: ${version + 1}\n`,
            expected_sha256: read["sha256"]
          })
          if (outcome._tag === "Success") {
            version++
            succeeded++
          } else if (outcome._tag === "Failure") {
            expect(outcome.error.details, outcome.error.message).toMatchObject({ _tag: "@rx/tools/StaleFile" })
            if (outcome.error.message.includes("that write is lost")) {
              version++
              lost++
            } else {
              stale++
            }
          }
        }
      }))
      yield* exited
      const lines = fs.readFileSync(file, "utf8").split("\n").filter((line) => line !== "")
      expect(lines[0]).toBe(`version: ${version}`)
      const all = Array.from({ length: appends }, (_, i) => `append ${i}`)
      if (lost === 0) {
        expect(lines.slice(1)).toEqual(all)
      } else {
        // In order, and no more missing than the edits reported (one append at a time is in flight).
        const kept = lines.slice(1)
        expect(kept).toEqual(all.filter((line) => kept.includes(line)))
        expect(all.length - kept.length).toBeLessThanOrEqual(lost)
      }
      // Both happened: edits that went through while lines kept coming, and refusals.
      expect(succeeded).toBeGreaterThan(0)
      expect(stale).toBeGreaterThan(0)
      cleanup()
    }), 120_000)
})

describe("temp files and recovery after a crash", () => {
  it.live("write_file names its temp file after the call, and recovery removes exactly that file", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const callId = "goal-1:7"
      const temp = Workspace.tempName("big.txt", callId)
      expect(temp).toBe(`.big.txt.${sha256(callId).slice(0, 12)}.rx-tmp`)
      // Watch the folder while a large write runs: its temp file has the call's name.
      const seen = new Set<string>()
      const content = "x".repeat(63) + "\n"
      const big = content.repeat(512 * 1024)
      const watcher = yield* Effect.fork(Effect.forever(Effect.sync(() => {
        for (const name of fs.readdirSync(ws)) seen.add(name)
      }).pipe(Effect.zipRight(Effect.sleep(Duration.millis(1))))))
      ok(yield* withTools({ ...config, maxWriteBytes: 64 * 1024 * 1024 }, call("write_file", { path: "big.txt", content: big }, callId)))
      yield* Fiber.interrupt(watcher)
      expect([...seen].filter((name) => name.endsWith(".rx-tmp"))).toEqual([temp])
      expect(fs.readdirSync(ws)).toEqual(["big.txt"])

      // What a kill during the write leaves: the temp file beside the target, no target.
      fs.writeFileSync(path.join(ws, Workspace.tempName("new.txt", "goal-1:8")), "partial")
      fs.writeFileSync(path.join(ws, Workspace.tempName("new.txt", "goal-1:9")), "another call's")
      const unknown = yield* withTools(config, recover("write_file", { path: "new.txt", content: "hello\n" }, "goal-1:8"))
      expect(Option.isNone(unknown)).toBe(true)
      expect(fs.readdirSync(ws).sort()).toEqual([Workspace.tempName("new.txt", "goal-1:9"), "big.txt"].sort())
      // The same call's leftover, were it not removed, makes the write fail rather than reuse it.
      const leftover = failed(yield* withTools(config, call("write_file", { path: "new.txt", content: "x" }, "goal-1:9")))
      expect(leftover.kind).toBe("recoverable")
      expect(fs.existsSync(path.join(ws, "new.txt"))).toBe(false)
      // A temp file in a folder that no longer exists, or none at all: nothing to do.
      const none = yield* withTools(config, recover("write_file", { path: "gone/new.txt", content: "x" }, "goal-1:10"))
      expect(Option.isNone(none)).toBe(true)
      cleanup()
    }), 60_000)

  it.effect("write_file recovery records the call as done when the file holds exactly its content", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const file = path.join(ws, "a.txt")
      fs.writeFileSync(file, "old\n")
      const overwrite = { path: "a.txt", content: "new\n", expected_sha256: sha256("old\n") }
      // Killed before the rename: the file is as before, the outcome unknown.
      expect(Option.isNone(yield* withTools(config, recover("write_file", overwrite, "g:1")))).toBe(true)
      // Killed after the rename: the file holds the intended content.
      fs.writeFileSync(path.join(ws, Workspace.tempName("a.txt", "g:1")), "new\n")
      fs.writeFileSync(file, "new\n")
      const done = yield* withTools(config, recover("write_file", overwrite, "g:1"))
      expect(done).toEqual(Option.some({
        _tag: "Success",
        output: {
          path: "a.txt",
          resolved_path: file,
          created: false,
          sha256: sha256("new\n"),
          previous_sha256: sha256("old\n"),
          bytes: 4,
          lines: 1
        }
      }))
      expect(fs.readdirSync(ws)).toEqual(["a.txt"])
      // A create that took effect.
      fs.writeFileSync(path.join(ws, "b.txt"), "made\n")
      const created = yield* withTools(config, recover("write_file", { path: "b.txt", content: "made\n" }, "g:2"))
      expect(Option.map(created, (outcome) => outcome._tag === "Success" && (outcome.output as { created: boolean }).created)).toEqual(Option.some(true))
      // The file was changed again since: unknown.
      fs.writeFileSync(file, "newer\n")
      expect(Option.isNone(yield* withTools(config, recover("write_file", overwrite, "g:1")))).toBe(true)
      cleanup()
    }))

  it.effect("edit_file recovery is certain only when undoing the edit gives the expected pre-image", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const file = path.join(ws, "e.ts")
      const before = "let a = 1\nlet b = 1\nlet c = 2 // a = 1\n"
      const edit = { path: "e.ts", old_text: "let c = 2", new_text: "let c = 1", expected_sha256: sha256(before) }
      // Not applied: the file is the pre-image, which has new_text too ("= 1").
      fs.writeFileSync(file, before)
      expect(Option.isNone(yield* withTools(config, recover("edit_file", edit, "g:1")))).toBe(true)
      // Applied: new_text occurs several times; only one undo gives the expected hash.
      const after = "let a = 1\nlet b = 1\nlet c = 1 // a = 1\n"
      fs.writeFileSync(file, after)
      fs.writeFileSync(path.join(ws, Workspace.tempName("e.ts", "g:1")), after)
      const done = yield* withTools(config, recover("edit_file", edit, "g:1"))
      expect(done).toEqual(Option.some({
        _tag: "Success",
        output: {
          path: "e.ts",
          resolved_path: file,
          replacements: 1,
          sha256: sha256(after),
          previous_sha256: sha256(before),
          bytes: Buffer.byteLength(after)
        }
      }))
      expect(fs.readdirSync(ws)).toEqual(["e.ts"])
      // replace_all.
      const all = { path: "e.ts", old_text: "= 1", new_text: "= 5", replace_all: true, expected_sha256: sha256(after) }
      fs.writeFileSync(file, after.split("= 1").join("= 5"))
      const replaced = yield* withTools(config, recover("edit_file", all, "g:2"))
      expect(Option.map(replaced, (outcome) => outcome._tag === "Success" && (outcome.output as { replacements: number }).replacements)).toEqual(Option.some(4))
      // Changed by someone else afterwards, or no expected_sha256: unknown.
      fs.writeFileSync(file, "something else\n")
      expect(Option.isNone(yield* withTools(config, recover("edit_file", all, "g:2")))).toBe(true)
      expect(Option.isNone(yield* withTools(config, recover("edit_file", { ...edit, expected_sha256: undefined }, "g:3")))).toBe(true)
      cleanup()
    }))
})

describe("the size a write may produce", () => {
  it.effect("write_file content and an edit_file result over maxWriteBytes are refused before writing", () =>
    Effect.gen(function*() {
      const { cleanup, config, ws } = setup()
      const capped = { ...config, maxWriteBytes: 1_000 }
      const tooBig = failed(yield* withTools(capped, invoke("write_file", { path: "big.txt", content: "x".repeat(1_001) })))
      expect(tooBig.kind).toBe("recoverable")
      expect(tooBig.message).toContain("1001 bytes")
      expect(tooBig.message).toContain("1000 bytes (maxWriteBytes)")
      expect(fs.readdirSync(ws)).toEqual([])
      ok(yield* withTools(capped, invoke("write_file", { path: "ok.txt", content: "x".repeat(1_000) })))
      // 10 bytes of input that would multiply the file: 100 "a" lines become 100 lines of 20.
      const original = "a\n".repeat(100)
      fs.writeFileSync(path.join(ws, "e.txt"), original)
      const grown = failed(yield* withTools(capped, invoke("edit_file", {
        path: "e.txt",
        old_text: "a",
        new_text: "b".repeat(20),
        replace_all: true,
        expected_sha256: sha256(original)
      })))
      expect(grown.kind).toBe("recoverable")
      expect(grown.message).toContain("2100 bytes")
      expect(grown.message).toContain("maxWriteBytes")
      expect(fs.readFileSync(path.join(ws, "e.txt"), "utf8")).toBe(original)
      expect(fs.readdirSync(ws).sort()).toEqual(["e.txt", "ok.txt"])
      cleanup()
    }))
})
