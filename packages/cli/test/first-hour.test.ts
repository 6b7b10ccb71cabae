/**
 * What a new user meets first, through the built binary: a failed command shown as failed, a
 * resume that says what it resumes, settings shown with their values, one clear line per problem,
 * JSON where a program reads the output, and a server that says what it does and leaves nothing
 * behind when it cannot start.
 */
import { describe, expect, it } from "@effect/vitest"
import { Event } from "@rx/kernel"
import * as View from "@rx/server/View"
import { Effect, Either, Schema } from "effect"
import { existsSync, mkdirSync } from "node:fs"
import * as Net from "node:net"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import * as TestDatabase from "../../store-pg/test/database.js"
import { bwrapWorks, exec, jsonLines, rx, sandbox, serveRx, start, until } from "./helpers.js"

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

const failing = "echo out; echo first >&2; echo 'the last line' >&2; exit 3"

/** How often `text` occurs in `all`. */
const count = (all: string, text: string) => all.split(text).length - 1

describe("a command that fails", () => {
  it.scopedLive("exit code and stderr's last line on the step line and in rx inspect (steps, trace, --json); rx replay --json; plurals", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([call("shell", { command: failing }), done("it failed")])
      const box = sandbox()
      const ran = yield* rx(["run", "fail", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"])
      expect(ran.code).toBe(0)
      expect(ran.stdout).toMatch(/\n\s+1\s+shell\s+\{"command":.*\s+exit 3\s+\d+ ms {2}stderr: the last line\n/)
      expect(ran.stdout).not.toMatch(/\s+ok\s+\d+ ms/)
      const id = /goal (g\w+)/.exec(ran.stdout)?.[1] ?? ""

      const inspected = yield* rx(["inspect", id, "--db", box.db])
      expect(inspected.stdout).toContain("  failed    exit 3, last line of stderr: the last line\n")
      expect(inspected.stdout).toMatch(/\n\s+1\s+shell\s+exit 3\s+\d+ ms\s+\{"command".*stderr: the last line\n/)
      // One of each reads as one.
      expect(inspected.stdout).toContain("  state     1 call, 0 failures in a row")
      expect(inspected.stdout).toContain("terminated (done), 2 iterations, 8 events")

      const json = yield* rx(["inspect", id, "--db", box.db, "--json"])
      expect(json.code).toBe(0)
      // `View.Goal`, encoded; its steps are the same the web inspector draws from the events it follows.
      const goal = Schema.decodeUnknownSync(View.Goal)(JSON.parse(json.stdout))
      expect(goal).toMatchObject({ goalId: id, goal: "fail", status: "terminated", iterations: 2, terminated: { reason: "done" }, phase: { _tag: "terminated", reason: "done" } })
      const steps = goal.steps
      const events = jsonLines((yield* rx(["events", id, "--db", box.db])).stdout).map((line) => Either.getOrThrow(Event.decode(line)))
      expect(steps).toEqual(View.steps(events))
      expect(steps[0]?.entries.find((e) => e._tag === "Call")).toMatchObject({ tool: "shell", input: { command: failing }, outcome: "command failed", failed: "exit 3", stderrLastLine: "the last line" })
      const one = JSON.parse((yield* rx(["inspect", id, "--db", box.db, "--json", "--step", "1"])).stdout) as Record<string, unknown>
      expect(one).toEqual({ goalId: id, ...Schema.encodeSync(View.Step)(steps[0] ?? { step: 0, entries: [] }) })

      const replayed = yield* rx(["replay", id, "--db", box.db, "--json"])
      expect(replayed.code).toBe(0)
      expect(JSON.parse(replayed.stdout)).toEqual({ goalId: id, identical: true, events: 8, complete: true, reason: "done" })
      expect((yield* rx(["replay", id, "--db", box.db])).stdout).toContain("identical, 8 events")
    }), 60_000)
})

describe("rx resume after rx was killed during a call", () => {
  it.scopedLive("a header, the call's input on its line, and no duration that counts the time rx was dead", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([call("shell", { command: "sleep 3" }), done("resumed")])
      const box = sandbox()
      const child = start(["run", "wait", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", "--json"])
      yield* until(() => child.output().stdout.includes("\"ToolStarted\""), "the call to start")
      child.kill("SIGKILL")
      yield* Effect.promise(() => child.done)
      const id = String(jsonLines(child.output().stdout)[0]?.["goalId"])
      // Dead for a while: a duration that counted it would be over 2 s.
      yield* Effect.sleep("2500 millis")
      const resumed = yield* rx(["resume", id, "--db", box.db])
      expect(resumed.stderr).toBe("")
      expect(resumed.stdout).toMatch(new RegExp(`^resuming goal ${id}: wait\\n {2}model fake at .*, sandbox none\\n {2}open, not suspended \\(rx stopped while it ran\\), after 0 iterations\\n {2}rx stopped during call ${id}:1: shell \\{"command":"sleep 3"\\}\\n`))
      expect(resumed.stdout).toMatch(/\n\s+1\s+shell\s+\{"command":"sleep 3"\}\s+unknown: .* cut short\n/)
      expect(resumed.stdout).not.toContain(" null ")
      expect(resumed.stdout).toContain("done after 2 iterations")
      const inspected = yield* rx(["inspect", id, "--db", box.db])
      expect(inspected.stdout).toMatch(/ {2}duration {2}unknown: rx stopped during the call \(\d+ ms from its start to this record, rx's downtime included\)/)
      expect(inspected.stdout).toMatch(/\n\s+1\s+shell\s+unknown\s+cut short/)
    }), 60_000)
})

describe("rx config", () => {
  it.live("a default is shown as its value, from default; what --sandbox auto is here", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const ran = yield* rx(["config"], {}, box.root)
      expect(ran.code).toBe(0)
      expect(ran.stdout).toMatch(/^timeout\s+600\s+default$/m)
      expect(ran.stdout).toMatch(/^maxIterations\s+50\s+default$/m)
      expect(ran.stdout).toMatch(/^model\s+-\s+unset$/m)
      expect(ran.stdout).not.toMatch(/default: /)
      // The sources stand in one column, however long a default's text (the log's path aside, which may be any length).
      const source = / (default|unset|flag|env \S+|\/\S+)$/
      const table = ran.stdout.split("\n").filter((line) => /^\w+ {2,}/.test(line) && source.test(line) && !line.startsWith("db "))
      const columns = new Set(table.map((line) => line.search(source)))
      expect(table.length).toBeGreaterThan(20)
      expect(columns.size).toBe(1)
      expect(ran.stdout).toMatch(bwrapWorks ? /\nsandbox auto here: bubblewrap \(\/\S+\), so shell runs sandboxed\n/ : /\nsandbox auto here: bubblewrap cannot be used, so shell is not offered/)
      const json = JSON.parse((yield* rx(["config", "--json"], {}, box.root)).stdout) as { settings: Record<string, Record<string, unknown>> }
      expect(json.settings["timeout"]).toEqual({ value: "600", from: "default" })
      expect(json.settings["sandbox"]).toEqual({ value: "auto", from: "default", here: bwrapWorks ? "bwrap" : "unavailable" })
      // Asked for plainly, auto is not resolved.
      expect((yield* rx(["config", "--sandbox", "none"], {}, box.root)).stdout).not.toContain("sandbox auto here")
    }))
})

describe("one clear line per problem", () => {
  it.scopedLive("an unreachable model: its reason once on stdout and once on stderr, later retries say it is the same", () =>
    Effect.gen(function*() {
      const port = yield* FakeServer.freePort
      const box = sandbox()
      const url = `http://127.0.0.1:${port}/v1`
      const ran = yield* rx(["run", "x", "--db", box.db, "--workspace", box.workspace, "--base-url", url, "--model", "m"])
      expect(ran.code).toBe(11)
      expect(count(ran.stdout, `cannot reach ${url}`)).toBe(1)
      expect(count(ran.stderr, `cannot reach ${url}`)).toBe(1)
      expect(ran.stdout).toMatch(/\n {6}suspended \(model_unavailable\)\n/)
      expect(ran.stdout).toMatch(/suspended \(model_unavailable\), open, after 0 iterations \(goal \w+, exit 11\)\n/)
      expect(ran.stderr.split("\n").filter((l) => l.startsWith("rx: warning: the same again; attempt ")).length).toBe(2)
    }), 120_000)

  it.live("a missing workspace names it and what to do; an unknown goal names the database", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const missing = join(box.root, "nope")
      const ran = yield* rx(["run", "x", "--db", box.db, "--workspace", missing, "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
      expect(ran.code).toBe(1)
      expect(ran.stderr).toBe(`rx: the workspace ${missing} does not exist: create it, or pass --workspace with an existing folder\n`)
      expect(existsSync(box.db)).toBe(false)
      const served = yield* rx(["serve", "--port", "0", "--db", box.db, "--workspace", missing, "--model", "m"])
      expect(served.stderr).toBe(`rx: the workspace ${missing} does not exist: create it, or pass --workspace with an existing folder\n`)
      // A log to look in.
      yield* rx(["run", "x", "--db", box.db, "--workspace", box.workspace, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--retries", "0"])
      for (const command of ["inspect", "replay", "resume", "events"]) {
        const unknown = yield* rx([command, "g-nope", "--db", box.db])
        expect(unknown.code).toBe(1)
        expect(unknown.stderr).toBe(`rx: no goal with id g-nope in the database ${box.db} (rx list --db ${box.db} shows its goals; --db or RX_DB names another)\n`)
      }
    }), 60_000)
})

describe("rx serve", () => {
  it.scopedLive("says when it leaves an open goal outside its root, and when it has stopped", () =>
    Effect.gen(function*() {
      const box = sandbox()
      // An open goal in the workspace (suspended: no model server).
      const first = yield* rx(["run", "x", "--db", box.db, "--workspace", box.workspace, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--retries", "0"])
      expect(first.code).toBe(11)
      const id = /goal (g\w+)/.exec(first.stdout)?.[1] ?? ""
      const other = join(box.root, "other")
      mkdirSync(other)
      const server = yield* FakeServer.make([])
      const { child } = yield* serveRx({ db: box.db, workspace: other }, server.baseUrl)
      yield* until(() => child.output().stderr.includes(id), "the note on the goal left out")
      expect(child.output().stderr).toMatch(new RegExp(`rx: warning: goal ${id} is open but works in \\S+ws, outside this server's workspace root \\S+other: it is not resumed here \\(rx resume ${id} runs it\\)`))
      child.kill("SIGTERM")
      const ended = yield* Effect.promise(() => child.done)
      expect(ended.stdout).toMatch(/rx serve: stopping: .*\nrx serve: stopped; open goals stay recorded and resume at the next start\n$/)
    }), 60_000)

  it.scopedLive("SIGTERM (or SIGHUP) while rx serve or rx worker starts stops the start and says so, rather than killing it mid-way", () =>
    Effect.gen(function*() {
      // A "Postgres" that takes connections and never answers: the command is starting while it waits.
      const { taken, url: db } = yield* TestDatabase.silent
      const box = sandbox()
      const port = yield* FakeServer.freePort
      for (const [signal, command, ...args] of [["SIGTERM", "serve", "--port", "0"], ["SIGHUP", "worker", "--port", String(port)]] as const) {
        const connected = taken()
        const child = start([command, ...args, "--db", db, "--workspace", box.workspace, "--model", "m", "--sandbox", "none"])
        yield* until(() => taken() > connected || child.exitCode !== null, `rx ${command} to connect to its log`)
        const signalled = Date.now()
        child.kill(signal)
        const ended = yield* Effect.promise(() => child.done)
        expect([ended.code, ended.signal, ended.stdout], ended.stderr).toEqual([0, null, `rx ${command}: stopped while it started (${signal}); what it had started is closed\n`])
        // Not held until the connection attempt gives up by itself (the store's connect timeout, 10 s).
        expect(Date.now() - signalled).toBeLessThan(9_000)
      }
    }), 90_000)

  it.scopedLive("a port in use: one line, and no database nor token file made", () =>
    Effect.gen(function*() {
      const taken = yield* Effect.acquireRelease(
        Effect.async<Net.Server>((resume) => {
          const s = Net.createServer()
          s.listen({ host: "127.0.0.1", port: 0 }, () => resume(Effect.succeed(s)))
        }),
        (s) => Effect.promise(() => new Promise<void>((resolve) => s.close(() => resolve())))
      )
      const port = (taken.address() as Net.AddressInfo).port
      const box = sandbox()
      const ran = yield* rx(["serve", "--port", String(port), "--db", box.db, "--workspace", box.workspace, "--model", "m", "--sandbox", "none"])
      expect(ran.code).toBe(1)
      expect(ran.stderr).toBe(`rx: port ${port} on 127.0.0.1 is in use (another rx serve?): --port N picks another, --port 0 any free one\n`)
      expect(existsSync(box.db)).toBe(false)
      expect(existsSync(join(box.root, "rx-server.token"))).toBe(false)
    }), 60_000)
})

describe("trying the in-process model", () => {
  it.live("the README's command writes the tiny model with a context that fits: rx run --model-file with default settings runs, and does not suspend", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const file = join(box.root, "rx-tiny.gguf")
      const script = join(import.meta.dirname, "..", "..", "llama", "scripts", "tiny-model.mjs")
      const wrote = yield* exec(process.execPath, [script, file])
      expect(wrote.code).toBe(0)
      expect(wrote.stdout).toContain(`wrote ${file} (`)
      expect(wrote.stdout).toContain("context 65,536 tokens")
      // As the README says it, with no --context: rx's default context and prompt budget.
      const ran = yield* rx(["run", "list the files", "--model-file", file, "--threads", "1", "--seed", "1", "--max-iterations", "2", "--db", box.db, "--workspace", box.workspace, "--sandbox", "none"])
      expect(ran.stdout).not.toContain("suspended")
      expect(ran.stdout).toContain("max_iterations after 2 iterations")
      expect(ran.code).toBe(2)
    }), 120_000)
})
