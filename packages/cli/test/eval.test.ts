/**
 * `rx eval` through the real binary: a goal recorded against a fake model server, then asked again
 * of servers scripted the same and otherwise (the requests they get are the ones the run sent, the
 * report names the step that differs, the gate sets the exit code, no tool runs); and the demo's
 * goal asked of the tiny GGUF model inside rx.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { mkdtempSync, readdirSync, readFileSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { TinyGguf } from "@rx/llama"
import * as FakeServer from "../../llm/test/FakeServer.js"
import { jsonLines, rx, sandbox } from "./helpers.js"

type Json = Record<string, any>

const call = (name: string, args: unknown) => FakeServer.completion({ toolCalls: [{ name, arguments: JSON.stringify(args) }], usage: { prompt_tokens: 100, completion_tokens: 10 } })
const done = (summary: string) => call("done", { summary })

const script = [
  call("write_file", { path: "ledger.txt", content: "one\n" }),
  call("read_file", { path: "hello.txt" }),
  call("list_dir", {}),
  done("wrote the ledger")
]

/** What a request asked: its conversation and tools (the model name and sampling settings are the server's). */
const asked = (server: FakeServer.FakeServer) => server.received.map((r) => { const body = r.body as Json; return [body["messages"], body["tools"]] })

/** Every file under `dir` but the log, with its content and modification time. */
const files = (dir: string): Record<string, string> =>
  Object.fromEntries(
    readdirSync(dir, { recursive: true, withFileTypes: true })
      .filter((e) => e.isFile() && !e.name.startsWith("rx.db"))
      .map((e) => {
        const file = join(e.parentPath, e.name)
        return [file, `${statSync(file).mtimeMs} ${readFileSync(file, "utf8")}`]
      })
  )

describe("rx eval", () => {
  it.scopedLive("the same model agrees on every decision, with the very requests of the run; one that differs at step 2 is named there and fails the gate; no tool runs", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const recording = yield* FakeServer.make(script)
      const at = (server: FakeServer.FakeServer) => ["--db", box.db, "--base-url", server.baseUrl, "--model", "fake", "--retries", "0"]
      const ran = yield* rx(["run", "write the ledger", ...at(recording), "--workspace", box.workspace, "--sandbox", "none", "--json"])
      expect(ran.code).toBe(0)
      const goalId = String(jsonLines(ran.stdout)[0]?.["goalId"])
      const before = files(box.workspace)
      expect(readFileSync(join(box.workspace, "ledger.txt"), "utf8")).toBe("one\n")

      const same = yield* FakeServer.make(script)
      const agreed = yield* rx(["eval", ...at(same), "--min-agreement", "1", "--json"])
      expect(agreed.code, agreed.stderr).toBe(0)
      expect(asked(same)).toEqual(asked(recording))
      const report = JSON.parse(agreed.stdout) as Json
      expect(Object.keys(report)).toEqual(["model", "minAgreement", "passes", "goals", "summary"])
      expect(report).toMatchObject({ model: "fake", minAgreement: 1, passes: true, summary: { requests: 4, agreement: 1, usage: { inputTokens: 400, outputTokens: 40 } } })
      expect(report["goals"].map((g: Json) => g["goalId"])).toEqual([goalId])
      expect(Object.keys(report["goals"][0]["steps"][0])).toEqual(["iteration", "seq", "kind", "recorded", "candidate", "approvals", "error", "usage", "durationMs"])
      expect(report["goals"][0]["steps"].map((s: Json) => [s["iteration"], s["kind"]])).toEqual([[1, "same"], [2, "same"], [3, "same"], [4, "same"]])
      // Progress on stderr, one line per request.
      expect(agreed.stderr.split("\n").filter((l) => /^rx eval: \d\/4 goal /.test(l))).toHaveLength(4)

      const other = yield* FakeServer.make([script[0], call("read_file", { path: "other.txt" }), script[2], script[3]] as ReadonlyArray<FakeServer.Step>)
      const differed = yield* rx(["eval", goalId, ...at(other), "--min-agreement", "0.9", "--json"])
      expect(differed.code).toBe(12)
      const second = JSON.parse(differed.stdout) as Json
      expect(second).toMatchObject({ passes: false, summary: { agreement: 0.75, byKind: { same: 3, same_tools: 1, other_tools: 0, no_action: 0, failed: 0 } } })
      expect(second["goals"][0]["steps"].filter((s: Json) => s["kind"] !== "same").map((s: Json) => [s["iteration"], s["kind"], s["candidate"]["calls"]])).toEqual([
        [2, "same_tools", [{ tool: "read_file", input: { path: "other.txt" } }]]
      ])

      // The table, for a person: the step, its kind, both decisions; the gate said.
      const third = yield* FakeServer.make([script[0], call("read_file", { path: "other.txt" }), script[2], script[3]] as ReadonlyArray<FakeServer.Step>)
      const shown = yield* rx(["eval", goalId, ...at(third), "--min-agreement", "0.9"])
      expect(shown.code).toBe(12)
      expect(shown.stdout).toMatch(/\n\s+2\s+same_tools\s+read_file \{"path":"hello.txt"\}\s+read_file \{"path":"other.txt"\}\n/)
      expect(shown.stdout).toContain("agreement 75% (3 of 4 decisions)")
      expect(shown.stdout).toContain("fails --min-agreement 0.9 (exit 12)")

      // No tool ran: the workspace (the ledger) is as the run left it.
      expect(files(box.workspace)).toEqual(before)
      expect((yield* rx(["eval", "--help"])).stdout).toMatch(/\n  --min-agreement X +rx eval: the least share/)
      const unknown = yield* rx(["eval", "nothing-such", ...at(same)])
      expect(unknown.code).toBe(1)
      expect(unknown.stderr).toContain("no goal with id nothing-such")
    }))

  it.live("the demo's goal asked of the tiny GGUF model inside rx: every decision compared, no tool run", () =>
    Effect.gen(function*() {
      const model = join(mkdtempSync(join(tmpdir(), "rx-cli-eval-")), "tiny.gguf")
      TinyGguf.writeTinyGguf(model)
      const demo = yield* rx(["demo", "--keep", "--json"])
      expect(demo.code).toBe(0)
      const root = /the demo's folder is kept: (\S+)/.exec(demo.stderr)?.[1] ?? ""
      expect(root).not.toBe("")
      const before = files(root)
      const ran = yield* rx(["eval", "--db", join(root, "rx.db"), "--model-file", model, "--threads", "1", "--context", "16384", "--seed", "3", "--json"])
      expect(ran.code, ran.stderr).toBe(0)
      // stderr holds the progress and nothing of llama.cpp's own log.
      expect(ran.stderr.split("\n").filter((line) => line !== "" && !line.startsWith("rx eval: "))).toEqual([])
      const report = JSON.parse(ran.stdout) as Json
      expect(report["model"]).toBe("tiny.gguf")
      expect(report["summary"]["requests"]).toBe(5)
      const steps = report["goals"][0]["steps"] as ReadonlyArray<Json>
      expect(steps.map((s) => s["iteration"])).toEqual([1, 2, 3, 4, 5])
      expect(steps[0]?.["recorded"]["calls"]).toEqual([{ tool: "list_dir", input: { path: "." } }])
      for (const step of steps) {
        expect(["same", "same_tools", "other_tools", "no_action"]).toContain(step["kind"])
        expect(step["usage"]["inputTokens"]).toBeGreaterThan(0)
      }
      expect(files(root)).toEqual(before)
    }))
})
