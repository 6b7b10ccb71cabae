/**
 * MCP servers as rx tools against a real server written with the SDK's McpServer
 * (test/fixtures/server.mjs): over stdio and over HTTP on 127.0.0.1 (streamable, and SSE only),
 * through the kernel's runner. A call that fails the schema is rejected unsent; `isError`, a
 * hang (cancelled at the timeout), a crash are recorded failures; a changed tool list on resume
 * is reported and the recorded one kept.
 */
import { describe, expect, it } from "@effect/vitest"
import { type Event, LanguageModel, Runner, StateStore, ToolRegistry } from "@rx/kernel"
import { McpTools, Servers } from "@rx/mcp"
import { Sandbox } from "@rx/tools"
import { Effect, Either, Exit, Layer, Scope } from "effect"
import { execFileSync, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import * as Command from "../src/internal/command.js"
import * as Limits from "../../tools/src/internal/limits.js"
import { marked, processesWith } from "../../tools/test/processes.js"

const fixture = path.join(import.meta.dirname, "fixtures", "server.mjs")
const none = { _tag: "None", prlimit: undefined } as const

const temp = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "rx-mcp-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** A stdio server named `t`, logging to `log`. */
const stdio = (log: string, ...extra: ReadonlyArray<string>): Servers.Server => ({ name: "t", command: [process.execPath, fixture, "--log", log, ...extra] })

/** The fixture over HTTP (`--http` or `--sse`), stopped with the scope; its URL. */
const http = (mode: "--http" | "--sse") =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly kill: () => void }>((resume) => {
      const child = spawn(process.execPath, [fixture, mode], { stdio: ["ignore", "pipe", "ignore"] })
      child.stdout.on("data", (chunk: Buffer) => {
        const port = /listening (\d+)/.exec(chunk.toString())?.[1]
        if (port !== undefined) resume(Effect.succeed({ url: `http://127.0.0.1:${port}/mcp`, kill: () => child.kill("SIGKILL") }))
      })
    }),
    (server) => Effect.sync(server.kill)
  )

/** Run a goal whose model answers `answers` in turn, with the MCP tools of `source`. */
const run = (source: McpTools.Source, answers: ReadonlyArray<LanguageModel.Response>) =>
  Effect.gen(function*() {
    const store = yield* StateStore.makeMemory
    const services = Layer.mergeAll(
      Layer.succeed(StateStore.StateStore, store),
      ToolRegistry.layer(source.tools),
      LanguageModel.layerScripted(answers)
    )
    const result = yield* Runner.run({ goal: "use the MCP tools", goalId: "g" }).pipe(Effect.provide(services))
    return { result, events: yield* store.load("g") }
  })

const outcome = (events: ReadonlyArray<Event.Event>, tool: string) =>
  events.find((e): e is Event.Of<"ToolSucceeded"> | Event.Of<"ToolFailed"> => (e._tag === "ToolSucceeded" || e._tag === "ToolFailed") && e.tool === tool)

const lines = (file: string) => (fs.existsSync(file) ? fs.readFileSync(file, "utf8").trim().split("\n") : [])

describe("McpTools over stdio", () => {
  it.scoped("tools as NAME__tool with their hints; a call runs; a call failing the schema is rejected unsent; isError is a recoverable failure", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const log = path.join(dir, "log")
      const source = yield* McpTools.make([stdio(log)], { workspace: dir, sandbox: none })
      const specs = source.tools.map((t) => t.spec)
      expect(specs.map((s) => s.name).filter((n) => !n.includes("weird")).sort()).toEqual(["t__add", "t__big", "t__crash", "t__fail", "t__hang", "t__write"])
      // "weird.name" is no function name for model APIs: cleaned, with a hash of the original.
      expect(specs.filter((s) => s.name.includes("weird")).map((s) => s.name)).toEqual([expect.stringMatching(/^t__weird_name_[0-9a-f]{6}$/)])
      for (const name of specs.map((s) => s.name)) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/)
      // Its readOnlyHint is a claim: not idempotent unless the user says so.
      expect(specs.find((s) => s.name === "t__add")).toMatchObject({ idempotent: false, parameters: { type: "object", required: ["a", "b"] } })
      expect(specs.find((s) => s.name === "t__write")?.idempotent).toBe(false)
      expect(source.ask).toEqual(["t__write"])

      const { events, result } = yield* run(source, [
        LanguageModel.callTool("t__add", { a: 2, b: "three" }),
        LanguageModel.callTool("t__add", { a: 2, b: 3 }),
        LanguageModel.callTool("t__fail", {}),
        LanguageModel.done("added")
      ])
      expect(result).toMatchObject({ status: "terminated", reason: "done" })
      expect(events.find((e) => e._tag === "ActionRejected")).toMatchObject({ kind: "invalid_input", tool: "t__add" })
      expect(outcome(events, "t__add")).toMatchObject({ _tag: "ToolSucceeded", output: { content: [{ type: "text", text: "5" }] } })
      expect(outcome(events, "t__fail")).toMatchObject({ _tag: "ToolFailed", error: { kind: "recoverable", message: "fail: no such thing" } })
      // The rejected call never reached the server.
      expect(lines(log)).toEqual(["started", "add 2 3", "fail"])
    }))

  it.scoped("a call that hangs is cancelled at the timeout (the server is told); output is capped", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const log = path.join(dir, "log")
      const source = yield* McpTools.make([stdio(log)], { workspace: dir, sandbox: none, timeoutMs: 500, maxOutputChars: 1_000 })
      const { events } = yield* run(source, [LanguageModel.callTool("t__hang", {}), LanguageModel.callTool("t__big", {}), LanguageModel.done("ok")])
      expect(outcome(events, "t__hang")).toMatchObject({
        _tag: "ToolFailed",
        error: { kind: "recoverable", message: "MCP server t: hang took more than 500 ms; the request was cancelled" }
      })
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 300)))
      expect(lines(log)).toContain("hang cancelled")
      expect(outcome(events, "t__big")).toMatchObject({ _tag: "ToolSucceeded", output: { content: [{ type: "text", truncated: true, chars: 200_000 }] } })
      const big = outcome(events, "t__big")
      expect(JSON.stringify(big?._tag === "ToolSucceeded" ? big.output : "").length).toBeLessThan(1_200)
    }))

  it.scoped("a server that crashes mid-call: that call and later ones are recorded failures, never defects; the run goes on", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const source = yield* McpTools.make([stdio(path.join(dir, "log"))], { workspace: dir, sandbox: none })
      const { events, result } = yield* run(source, [
        LanguageModel.callTool("t__crash", {}),
        LanguageModel.callTool("t__add", { a: 1, b: 1 }),
        LanguageModel.done("survived")
      ])
      expect(result).toMatchObject({ status: "terminated", reason: "done" })
      const crashed = outcome(events, "t__crash")
      expect(crashed).toMatchObject({ _tag: "ToolFailed", error: { kind: "recoverable" } })
      expect(crashed?._tag === "ToolFailed" ? crashed.error.message : "").toContain("MCP server t is not running any more")
      expect(crashed?._tag === "ToolFailed" ? crashed.error.message : "").toContain("about to crash")
      expect(outcome(events, "t__add")).toMatchObject({ _tag: "ToolFailed", error: { kind: "recoverable" } })
    }))

  it.scoped("the servers stop with the scope", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const log = path.join(dir, "log")
      const scope = yield* Scope.make()
      yield* Scope.extend(McpTools.make([stdio(log, "--pid")], { workspace: dir, sandbox: none }), scope)
      const children = () => fs.readdirSync("/proc").filter((p) => /^\d+$/.test(p)).filter((p) => {
        try {
          return fs.readFileSync(`/proc/${p}/cmdline`, "utf8").includes(log)
        } catch {
          return false
        }
      })
      expect(children()).toHaveLength(1)
      yield* Scope.close(scope, Exit.void)
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 500)))
      expect(children()).toHaveLength(0)
    }))

  it.scoped("a server that cannot start, or is to run in a sandbox that cannot be used, is a McpError naming it; nothing runs", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const missing = yield* Effect.flip(McpTools.make([{ name: "gone", command: ["/nonexistent/mcp-server"] }], { workspace: dir, sandbox: none, startTimeoutMs: 5_000 }))
      expect(missing).toMatchObject({ _tag: "@rx/mcp/McpError", server: "gone" })
      expect(missing.message).toContain("MCP server gone: cannot start")
      const exits = yield* Effect.flip(McpTools.make([{ name: "quits", command: [process.execPath, "-e", "console.error('bad config'); process.exit(2)"] }], { workspace: dir, sandbox: none, startTimeoutMs: 5_000 }))
      expect(exits.message).toContain("bad config")
      const log = path.join(dir, "log")
      const unsandboxed = yield* Effect.flip(McpTools.make([{ ...stdio(log), sandbox: { network: false, read: [] } }], { workspace: dir, sandbox: { _tag: "Unavailable", reason: "bubblewrap is not installed" } }))
      expect(unsandboxed.message).toContain("MCP server t: not started: it is to run in the sandbox, which cannot be used here (bubblewrap is not installed)")
      expect(lines(log)).toEqual([])
    }))

  it.scoped("on resume: the recorded tools are offered as recorded; a new, changed or removed tool is reported", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const first = yield* Effect.scoped(McpTools.make([stdio(path.join(dir, "log"))], { workspace: dir, sandbox: none }))
      const recorded = first.tools.map((t) => t.spec)
      const again = yield* McpTools.make([stdio(path.join(dir, "log"), "--variant", "2")], { workspace: dir, sandbox: none, pinned: recorded })
      expect(again.tools.map((t) => t.spec.name)).not.toContain("t__extra")
      expect(again.tools.find((t) => t.spec.name === "t__add")?.spec).toEqual(recorded.find((s) => s.name === "t__add"))
      expect(again.notes).toHaveLength(1)
      expect(again.notes[0]).toContain("t__extra is new (not offered to this goal)")
      expect(again.notes[0]).toContain("t__add changed (offered as the goal recorded it)")
      expect(again.notes[0]).toContain("t__fail is gone (its calls will fail)")
    }))
})

/** Whether bubblewrap works here: the sandboxed case needs it, and is skipped with a printed reason without it. */
const bwrapWorks = Either.isRight(Either.try(() => execFileSync("/usr/bin/bwrap", ["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--", "/bin/true"], { stdio: "ignore" })))
if (!bwrapWorks) console.log("bubblewrap does not work here: the sandboxed MCP server case is skipped")

describe.skipIf(!bwrapWorks)("McpTools in the sandbox", () => {
  it.scoped("a stdio server sandboxed on request runs in bubblewrap: it writes in the workspace, not outside it, and has no network", () =>
    Effect.gen(function*() {
      const workspace = yield* temp
      const elsewhere = yield* temp
      // The server sits in the workspace: only the workspace and the system folders are visible.
      fs.copyFileSync(path.join(import.meta.dirname, "fixtures", "escape.mjs"), path.join(workspace, "escape.mjs"))
      const sandbox = yield* Sandbox.resolve("bwrap", workspace)
      const outside = path.join(elsewhere, "escaped.txt")
      const inside = path.join(workspace, "stayed.txt")
      const source = yield* McpTools.make([{ name: "x", command: [process.execPath, path.join(workspace, "escape.mjs"), outside, inside], sandbox: { network: false, read: [] } }], { workspace, sandbox })
      const { events } = yield* run(source, [LanguageModel.callTool("x__escape", {}), LanguageModel.done("tried")])
      const result = outcome(events, "x__escape")
      const report = JSON.parse(result?._tag === "ToolSucceeded" ? String((result.output as { content: ReadonlyArray<{ text: string }> }).content[0]?.text) : "{}") as Record<string, string>
      expect(report["inside"]).toBe("done")
      expect(report["outside"]).toMatch(/^refused/)
      expect(report["network"]).toMatch(/^refused/)
      expect(fs.existsSync(outside)).toBe(false)
      expect(fs.readFileSync(inside, "utf8")).toBe("stayed")
    }), 30_000)

  it.scoped("a sandboxed server's program installed outside the system folders (Node by nvm, or in a cache) is bound read-only and runs", () =>
    Effect.gen(function*() {
      const workspace = yield* temp
      const installation = yield* temp
      fs.mkdirSync(path.join(installation, "bin"))
      fs.mkdirSync(path.join(installation, "lib", "node_modules"), { recursive: true })
      const node = path.join(installation, "bin", "node")
      fs.symlinkSync(process.execPath, node)
      // The link's installation; and the real program's, unless it lies in a system folder.
      const real = fs.realpathSync(process.execPath)
      const realInstallation = fs.existsSync(path.join(real, "..", "..", "lib", "node_modules")) ? path.dirname(path.dirname(real)) : path.dirname(real)
      const system = Sandbox.systemPaths.some((folder) => real.startsWith(`${folder}/`))
      expect(Command.sandboxReads(node, workspace, "")).toEqual(system ? [installation] : [installation, realInstallation])
      expect(Command.sandboxReads("node", workspace, path.join(installation, "bin"))).toEqual(Command.sandboxReads(node, workspace, ""))
      expect(Command.sandboxReads("/bin/sh", workspace, "")).toEqual([])
      fs.copyFileSync(path.join(import.meta.dirname, "fixtures", "escape.mjs"), path.join(workspace, "escape.mjs"))
      const sandbox = yield* Sandbox.resolve("bwrap", workspace)
      const inside = path.join(workspace, "stayed.txt")
      const source = yield* McpTools.make([{ name: "x", command: [node, path.join(workspace, "escape.mjs"), path.join(installation, "escaped.txt"), inside], sandbox: { network: false, read: [] } }], { workspace, sandbox })
      const { events } = yield* run(source, [LanguageModel.callTool("x__escape", {}), LanguageModel.done("tried")])
      expect(outcome(events, "x__escape")?._tag).toBe("ToolSucceeded")
      expect(fs.readFileSync(inside, "utf8")).toBe("stayed")
      // Bound read-only: the server could not write its installation.
      expect(fs.existsSync(path.join(installation, "escaped.txt"))).toBe(false)
    }), 30_000)
})

describe("McpTools over HTTP", () => {
  it.scoped("streamable HTTP, and the SSE transport for a server that speaks only that", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      for (const mode of ["--http", "--sse"] as const) {
        const server = yield* http(mode)
        const source = yield* McpTools.make([{ name: "web", url: server.url }], { workspace: dir, sandbox: none })
        const { events } = yield* run(source, [LanguageModel.callTool("web__add", { a: 20, b: 22 }), LanguageModel.done("added")])
        expect(outcome(events, "web__add")).toMatchObject({ _tag: "ToolSucceeded", output: { content: [{ type: "text", text: "42" }] } })
      }
      const refused = yield* Effect.flip(McpTools.make([{ name: "web", url: "http://127.0.0.1:1/mcp" }], { workspace: dir, sandbox: none, startTimeoutMs: 5_000 }))
      expect(refused.message).toContain("MCP server web: cannot connect to http://127.0.0.1:1/mcp")
    }))
})

describe("McpTools.baseEnvironment", () => {
  it("PATH, HOME, the locale and proxies of rx's environment, nothing else; PATH without relative folders or the workspace's", () => {
    const env = McpTools.baseEnvironment({
      PATH: `/usr/bin:.::bin:/ws/node_modules/.bin:/ws:/opt/tool/bin`,
      HOME: "/home/me",
      LANG: "C.UTF-8",
      LC_ALL: "C",
      HTTPS_PROXY: "http://proxy:3128",
      RX_TOKEN: "t",
      RX_API_KEY: "k",
      OTEL_EXPORTER_OTLP_HEADERS: "authorization=x",
      OPENAI_API_KEY: "o",
      SHELL: "() { evil; }"
    }, "/ws")
    expect(env).toEqual({ PATH: "/usr/bin:/opt/tool/bin", PYTHONSAFEPATH: "1", HOME: "/home/me", LANG: "C.UTF-8", LC_ALL: "C", HTTPS_PROXY: "http://proxy:3128" })
  })
})

describe("Servers.parse", () => {
  it("NAME=COMMAND LINE (quoted words kept whole) and NAME=URL; one clear message otherwise", () => {
    expect(Servers.parse("fs=npx -y @modelcontextprotocol/server-filesystem '/tmp/my dir'")).toEqual(
      Either.right({ name: "fs", command: ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/tmp/my dir"] })
    )
    expect(Servers.parse("web=https://example.com/mcp")).toEqual(Either.right({ name: "web", url: "https://example.com/mcp" }))
    expect(Servers.parse("nope")).toEqual(Either.left("expected NAME=COMMAND or NAME=URL, got \"nope\""))
    expect(Servers.parse("a_b=x")).toEqual(Either.left("\"a_b\": an MCP server's name is 1 to 24 letters, digits or \"-\""))
    expect(Servers.parse("fs=")).toEqual(Either.left("fs: give a command or a URL after \"=\""))
    expect(Servers.parse("fs=node 'x")).toEqual(Either.left("unclosed ' in \"node 'x\""))
    const server = { name: "fs", command: ["node", "my server.js", "--flag=it's"] } as const
    expect(Servers.parse(Servers.show(server))).toEqual(Either.right(server))
  })
})

const raw = path.join(import.meta.dirname, "fixtures", "raw.mjs")

/** Wait (polling) until nothing carries `marker`, or fail after `ms`. */
const gone = (marker: string, ms = 20_000) =>
  Effect.promise(() =>
    new Promise<ReadonlyArray<number>>((resolve) => {
      const began = Date.now()
      const tick = () => {
        const left = processesWith(marker)
        if (left.length === 0 || Date.now() - began > ms) return resolve(left)
        setTimeout(tick, 50)
      }
      tick()
    })
  )

/** Wait until a process carries `marker`. */
const running = (marker: string) =>
  Effect.promise(() =>
    new Promise<void>((resolve) => {
      const tick = () => (processesWith(marker).length > 0 ? resolve() : setTimeout(tick, 50))
      tick()
    })
  )

describe("McpTools: a server's processes end with it", () => {
  it.scoped("a daemon a server left (its own session, its parent gone) is ended when the scope closes", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const marker = yield* marked
      yield* Effect.scoped(Effect.gen(function*() {
        const source = yield* McpTools.make([{ name: "d", command: [process.execPath, raw, "--daemon", marker] }], { workspace: dir, sandbox: none })
        expect(source.tools.map((t) => t.spec.name)).toContain("d__env")
        yield* running(`${marker}:daemon`)
      }))
      expect(yield* gone(marker)).toEqual([])
    }))

  it.scoped.skipIf(Limits.discoverOnce() === undefined)("where rx can make a cgroup: a daemon that also cleared its environment is ended with its server", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const marker = yield* marked
      yield* Effect.scoped(Effect.gen(function*() {
        yield* McpTools.make([{ name: "d", command: [process.execPath, raw, "--bare-daemon", marker] }], { workspace: dir, sandbox: none })
        yield* running(`${marker}:daemon`)
      }))
      expect(yield* gone(marker)).toEqual([])
    }))

  it.scoped("a server that misses its start timeout, or fails initialize: it and its daemon are gone when make fails; the timeout names --mcp-start-timeout", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      for (const flag of ["--silent", "--fail-initialize"]) {
        const marker = yield* marked
        const failed = yield* Effect.flip(Effect.scoped(McpTools.make([{ name: "d", command: [process.execPath, raw, flag, "--daemon", marker] }], { workspace: dir, sandbox: none, startTimeoutMs: 1_500 })))
        expect(failed.message).toContain(flag === "--silent" ? "it did not answer initialize within 1.5 s" : "this server will not start")
        if (flag === "--silent") expect(failed.message).toContain("give it a longer --mcp-start-timeout")
        expect(yield* gone(marker)).toEqual([])
      }
      // Where the config file set the server's own timeout, that is what to change.
      const marker = yield* marked
      const failed = yield* Effect.flip(Effect.scoped(McpTools.make([{ name: "d", command: [process.execPath, raw, "--silent", "--daemon", marker] }], {
        workspace: dir,
        sandbox: none,
        launch: { d: { startTimeoutMs: 1_000, startTimeoutFrom: "\"startTimeout\" of d in your config file's mcpServers" } }
      })))
      expect(failed.message).toContain("within 1 s (a server that builds itself at start may need more: give it a longer \"startTimeout\" of d in your config file's mcpServers)")
      expect(yield* gone(marker)).toEqual([])
    }))

  it.scoped("a result nested 50,000 levels deep is a recorded failure that says so, with the limit", () =>
    Effect.gen(function*() {
      const dir = yield* temp
      const source = yield* McpTools.make([{ name: "d", command: [process.execPath, raw, "--deep", "50000"] }], { workspace: dir, sandbox: none })
      const { events, result } = yield* run(source, [LanguageModel.callTool("d__deep", {}), LanguageModel.done("ok")])
      expect(result).toMatchObject({ status: "terminated", reason: "done" })
      expect(outcome(events, "d__deep")).toMatchObject({
        _tag: "ToolFailed",
        error: { kind: "recoverable", message: "MCP server d: deep answered a result nested more than 100 levels deep, which rx does not record" }
      })
    }))
})

describe("how a stdio server's command runs (internal/command)", () => {
  it.scoped("npx runs outside the workspace, its . and ./ arguments as the workspace's paths, its package installed first; uvx likewise; a package, script or program in the workspace is refused", () =>
    Effect.gen(function*() {
      const ws = fs.realpathSync(yield* temp)
      const bin = fs.realpathSync(yield* temp)
      for (const name of ["npx", "uvx", "node"]) {
        fs.writeFileSync(path.join(bin, name), "#!/bin/sh\n")
        fs.chmodSync(path.join(bin, name), 0o755)
      }
      fs.writeFileSync(path.join(ws, "srv.ts"), "")
      fs.writeFileSync(path.join(ws, "data.json"), "{}")
      const plan = (command: ReadonlyArray<string>) => Command.plan(command as [string, ...Array<string>], ws, `${ws}:${bin}`)
      expect(plan(["npx", "-y", "@modelcontextprotocol/server-filesystem", ".", "./sub", "plain"])).toEqual(Either.right({
        file: path.join(bin, "npx"),
        args: ["-y", "@modelcontextprotocol/server-filesystem", ws, path.join(ws, "sub"), "plain"],
        runsIn: "private",
        install: ["-y", "--package", "@modelcontextprotocol/server-filesystem", "--", "true"]
      }))
      expect(plan(["npx", "-y", "-p", "pkg", "--", "bin", "."])).toMatchObject(Either.right({ args: ["-y", "-p", "pkg", "--", "bin", ws], install: ["-y", "-p", "pkg", "--", "true"] }))
      expect(plan(["uvx", "mcp-server-git", "--repository", "."])).toEqual(Either.right({ file: path.join(bin, "uvx"), args: ["mcp-server-git", "--repository", ws], runsIn: "private" }))
      // A data file may be named; code may not.
      expect(plan(["node", "/outside/server.mjs", "--config", "data.json"])).toMatchObject(Either.right({ runsIn: "workspace" }))
      for (const [command, said] of [
        [["uvx", "--from", "./", "server"], "its package ./"],
        [["npx", "-y", "tsx", "srv.ts"], "its argument srv.ts"],
        [["node", "srv.ts"], "its script srv.ts"],
        [["node", "--import", "./srv.ts", "/outside/x.mjs"], "srv.ts"],
        [[path.join(ws, "srv.ts")], "its program"]
      ] as const) {
        const refused = plan(command)
        expect(Either.isLeft(refused) ? refused.left : "", command.join(" ")).toMatch(/^refused: /)
        expect(Either.isLeft(refused) ? refused.left : "").toContain(said)
      }
      // A program only the workspace's PATH folder holds is not found.
      fs.writeFileSync(path.join(ws, "only-here"), "#!/bin/sh\n")
      fs.chmodSync(path.join(ws, "only-here"), 0o755)
      expect(plan(["only-here"])).toEqual(Either.left(`only-here was not found on its PATH (${ws}:${bin}); folders inside the workspace are not searched`))
    }))
})
