/**
 * What rx writes where, and that writing never costs work: a closed pipe does not stop a run,
 * `--json` stdout holds only events (logs go to stderr), `rx events --follow` notices a goal
 * nobody runs, and on a terminal a live line says what runs.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { join } from "node:path"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { bin, exec, jsonLines, rx, sandbox, start, until } from "./helpers.js"

const call = (name: string, args: unknown, content?: string) =>
  FakeServer.completion({ ...(content === undefined ? {} : { content }), toolCalls: [{ name, arguments: JSON.stringify(args) }] })
const done = (summary: string) => call("done", { summary })

/** Run rx with its stdout read until the first chunk, then closed, as `| head -1` does. */
const headOne = (args: ReadonlyArray<string>) =>
  Effect.promise(() =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "pipe"] })
      let stderr = ""
      child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
      child.stdout.once("data", () => child.stdout.destroy())
      child.on("close", (code) => resolve({ code, stderr }))
    })
  )

describe("a closed pipe never stops a run", () => {
  it.scopedLive("rx run | head -1: the goal runs to its end, recorded, and rx exits quietly", () =>
    Effect.gen(function*() {
      const steps = [call("list_dir", { path: "." }), call("read_file", { path: "hello.txt" }), call("list_dir", { path: "." }), done("all read")]
      const server = yield* FakeServer.make(steps)
      const box = sandbox()
      const ran = yield* headOne(["run", "read it all", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"])
      expect(ran.stderr).not.toMatch(/EPIPE|Error|at .*:\d+/)
      expect(ran.code).toBe(0)
      const listed = yield* rx(["list", "--db", box.db, "--json"])
      expect(jsonLines(listed.stdout)[0]).toMatchObject({ status: "terminated", reason: "done", iterations: 4 })
    }))

  it.scopedLive("rx demo | head -1, five times out of five", () =>
    Effect.gen(function*() {
      for (let i = 0; i < 5; i++) {
        const ran = yield* headOne(["demo"])
        expect(ran.stderr).not.toMatch(/EPIPE|Error/)
        expect(ran.code).toBe(0)
      }
    }))
})

describe("--json stdout holds only events", () => {
  it.scopedLive("a retried model call warns on stderr, never between the events", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([FakeServer.error(503, "warming up"), call("list_dir", { path: "." }), done("ok")])
      const box = sandbox()
      const ran = yield* rx(["run", "look", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", "--json"])
      expect(ran.code, ran.stderr).toBe(0)
      const lines = ran.stdout.trim().split("\n")
      for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow()
      expect(JSON.parse(lines.at(-1) ?? "{}")).toMatchObject({ _tag: "Terminated" })
      expect(ran.stderr).toMatch(/^rx: warning: .*503.*attempt 2/m)
      // Human output: the warning goes to stderr too.
      const human = yield* rx(["run", "look", "--db", box.db, "--workspace", box.workspace, "--base-url", (yield* FakeServer.make([FakeServer.error(503, "warming up"), done("ok")])).baseUrl, "--model", "fake", "--sandbox", "none"])
      expect(human.stdout).not.toMatch(/warning|level=/)
      expect(human.stderr).toMatch(/rx: warning: /)
    }))
})

describe("rx events --follow", () => {
  it.scopedLive("on a goal whose runner was killed: says so and stops (exit 11), or keeps waiting with --wait", () =>
    Effect.gen(function*() {
      const server = yield* FakeServer.make([{ kind: "stall" }])
      const box = sandbox()
      const runner = start(["run", "wait forever", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none", "--json"])
      yield* until(() => runner.output().stdout.includes("GoalSubmitted"), "the goal to start")
      yield* server.waitFor(1)
      const goalId = String(jsonLines(runner.output().stdout)[0]?.["goalId"])
      runner.kill("SIGKILL")
      yield* Effect.promise(() => runner.done)
      const followed = yield* rx(["events", goalId, "--follow", "--db", box.db])
      expect(followed.code).toBe(11)
      expect(jsonLines(followed.stdout)[0]).toMatchObject({ _tag: "GoalSubmitted" })
      expect(followed.stderr).toMatch(/no rx runs goal .* now .*rx resume .* continues it/)
      const waiting = start(["events", goalId, "--follow", "--wait", "--db", box.db])
      yield* until(() => waiting.output().stderr.includes("waiting for a runner"), "the note")
      expect(waiting.exitCode).toBe(null)
      // A resume that ends the goal ends the follow.
      const resumeServer = yield* FakeServer.make([done("finally")])
      const resumed = yield* rx(["resume", goalId, "--db", box.db, "--base-url", resumeServer.baseUrl])
      expect(resumed.code, resumed.stderr).toBe(0)
      const ended = yield* Effect.promise(() => waiting.done)
      expect(ended.code).toBe(0)
      expect(jsonLines(ended.stdout).at(-1)).toMatchObject({ _tag: "Terminated", reason: "done" })
    }), 60_000)
})

describe("the live status line", () => {
  it.scopedLive("on a terminal: what runs and for how long, on stderr; never in a pipe", () =>
    Effect.gen(function*() {
      const slow = (reply: FakeServer.Reply): FakeServer.Step => () => reply
      const server = yield* FakeServer.make([slow(call("shell", { command: "sleep 1.5" }, "Let me wait a moment.")), done("waited"), done("again")])
      const box = sandbox()
      const args = ["run", "wait", "--db", box.db, "--workspace", box.workspace, "--base-url", server.baseUrl, "--model", "fake", "--sandbox", "none"]
      // `script` gives rx a pseudo-terminal: stdout and stderr both land in its output.
      const shown = (yield* exec("script", ["-qec", [process.execPath, bin, ...args].map((a) => `'${a}'`).join(" "), "/dev/null"])).stdout
      expect(shown).toMatch(/running shell .*sleep 1\.5.* \d+\.\ds/)
      expect(shown).toContain("thought      Let me wait a moment.")
      const piped = yield* rx([...args.slice(0, 1), "wait again", ...args.slice(2)].map((a) => (a === box.db ? join(box.root, "second.db") : a)))
      expect(piped.stderr).not.toMatch(/running shell|\r/)
    }))
})
