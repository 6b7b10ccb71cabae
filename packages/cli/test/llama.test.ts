/**
 * `rx run --model-file` against a tiny GGUF model the test writes (random weights, byte
 * vocabulary), through the real `rx` binary: every answer is an action of the grammar, what the
 * tools' Schemas refuse is a recorded rejection, the goal suspends for approval and resumes with
 * its recorded model file, ends for a recorded reason, and inspects and replays. A file that
 * cannot be a model is one line on stderr and exit 1, with nothing recorded.
 */
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { existsSync, mkdtempSync, truncateSync, writeFileSync } from "node:fs"
import { tmpdir, totalmem } from "node:os"
import { join } from "node:path"
import { TinyGguf } from "@rx/llama"
import { jsonLines, rx, sandbox, start, until } from "./helpers.js"

type Json = Record<string, unknown>

const { tinyGguf, writeTinyGguf } = TinyGguf

const models = mkdtempSync(join(tmpdir(), "rx-cli-llama-"))
const model = join(models, "tiny.gguf")
writeTinyGguf(model)

/** The tools offered, each asked for: the goal suspends at each call, and a resume runs it. */
const tools = ["read_file", "list_dir", "write_file", "edit_file"]

/**
 * One thread (two on this machine's two cores are many times slower for a model this small), a
 * context that holds the byte-level prompt, and a fixed seed (its answers still differ from one CPU to another).
 */
const local = (box: ReturnType<typeof sandbox>) => [
  "--db", box.db, "--workspace", box.workspace, "--sandbox", "none",
  "--model-file", model, "--threads", "1", "--context", "16384", "--seed", "3"
]

describe("rx run --model-file", () => {
  // A random-weight model's answers depend on the CPU (llama.cpp picks its kernels by CPU
  // features): only what holds for every answer the grammar allows is asserted here.
  it.live("a whole goal against the tiny model: only actions of the grammar, rejections recorded, suspends and resumes, ends recorded, inspects and replays", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const first = yield* rx(["run", ...local(box), "--max-iterations", "4", "--tools", tools.join(","), "--ask", tools.join(","), "--json", "read hello.txt"])
      // stderr holds nothing of llama.cpp's own log.
      expect(first.stderr).not.toMatch(/llama|ggml|gguf/i)
      const goalId = String(jsonLines(first.stdout)[0]?.["goalId"])
      // Ended for a reason (done, max_iterations, malformed_output, repeated_failure, no_progress), or waiting for approval.
      expect([0, 2, 4, 5, 6, 11], first.stdout + first.stderr).toContain(first.code)
      if (first.code === 11) expect(first.stderr).toContain("waits for approval")
      let resumes = 0
      let last = first
      // At most one call per answer, so at most one suspension per iteration.
      while (last.code === 11 && resumes < 4) {
        expect((yield* rx(["approve", goalId, "--db", box.db])).code).toBe(0)
        // The resume names no model: the goal's recorded model file, threads, context and seed.
        last = yield* rx(["resume", goalId, "--db", box.db, "--json"])
        expect(last.stderr).not.toMatch(/llama|ggml|gguf/i)
        resumes++
      }
      expect([0, 2, 4, 5, 6], last.stdout + last.stderr).toContain(last.code)

      const log = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      expect(log.map((e) => e["seq"])).toEqual(log.map((_, i) => i))
      const submitted = log[0] as Json
      const metadata = (submitted["options"] as Json)["settings"] as Json
      expect(metadata).toMatchObject({ modelFile: model, threads: 1, context: 16384, seed: 3, model: "tiny.gguf" })
      expect(metadata["baseUrl"]).toBeUndefined()

      // Every answer is one JSON action naming an offered tool or done (the grammar allows nothing
      // else), or was cut off by the token limit and rejected as such.
      const answers = log.filter((e) => e["_tag"] === "ModelResponded").map((e) => e["response"] as Json)
      expect(answers.length).toBeGreaterThanOrEqual(1)
      for (const response of answers) {
        if (response["finishReason"] === "length") continue
        const action = JSON.parse(response["text"] as string) as Json
        expect([...tools, "done"]).toContain(action["tool"])
        expect(typeof action["input"]).toBe("object")
        expect(Object.keys(action).every((key) => ["thought", "tool", "input"].includes(key))).toBe(true)
      }
      // What the grammar allowed and a tool's Schema refused is a recorded rejection, never a bad action;
      // an answer cut off is a rejection too. Nothing else can be rejected.
      const rejected = log.filter((e) => e["_tag"] === "ActionRejected")
      for (const e of rejected) expect(["invalid_input", "cut_off"]).toContain(e["kind"])
      expect(rejected.filter((e) => e["kind"] === "cut_off").length).toBe(answers.filter((r) => r["finishReason"] === "length").length)
      // Every call ran only once approved, and exactly as requested.
      const started = log.filter((e) => e["_tag"] === "ToolStarted")
      for (const e of started) {
        expect(tools).toContain(e["tool"])
        const request = log.find((r) => r["_tag"] === "ApprovalRequested" && r["callId"] === e["callId"])
        expect(request?.["input"]).toEqual(e["input"])
        expect(log.find((r) => r["_tag"] === "ApprovalDecided" && r["callId"] === e["callId"])).toMatchObject({ approved: true })
      }
      expect(log.filter((e) => e["_tag"] === "Suspended").length).toBe(resumes)

      // Ended for a recorded reason, once, last.
      const ends = log.filter((e) => e["_tag"] === "Terminated")
      expect(ends.length).toBe(1)
      expect(log.at(-1)?.["_tag"]).toBe("Terminated")
      expect(["done", "max_iterations", "malformed_output", "repeated_failure", "no_progress"]).toContain(ends[0]?.["reason"])

      const inspected = yield* rx(["inspect", goalId, "--db", box.db])
      expect(inspected.code).toBe(0)
      expect(inspected.stdout).toContain(goalId)
      const replayed = yield* rx(["replay", goalId, "--db", box.db])
      expect(replayed.code, replayed.stdout + replayed.stderr).toBe(0)
      expect(replayed.stdout).toContain("identical")
    }), 240_000)

  // A rejection that must occur, whatever the weights: with a byte vocabulary, 8 tokens are 8
  // bytes, and the shortest action the grammar allows is longer, so every answer is cut off.
  it.live("answers that cannot fit --max-output-tokens are each rejected as cut off, none run, and the goal ends malformed_output", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const ran = yield* rx(["run", ...local(box), "--max-output-tokens", "8", "--tools", "read_file", "--json", "read hello.txt"])
      expect(ran.code, ran.stdout + ran.stderr).toBe(5)
      const log = jsonLines(ran.stdout)
      expect(log.map((e) => e["_tag"])).toEqual([
        "GoalSubmitted",
        ...Array.from({ length: 3 }, () => ["ModelResponded", "ActionRejected", "IterationCompleted"]).flat(),
        "Terminated"
      ])
      for (const e of log.filter((e) => e["_tag"] === "ModelResponded")) expect(e["response"]).toMatchObject({ finishReason: "length", usage: { outputTokens: 8 } })
      for (const e of log.filter((e) => e["_tag"] === "ActionRejected")) expect(e["kind"]).toBe("cut_off")
      expect(log.at(-1)).toMatchObject({ reason: "malformed_output" })
      const goalId = String(log[0]?.["goalId"])
      const replayed = yield* rx(["replay", goalId, "--db", box.db])
      expect(replayed.stdout).toContain("identical")
    }), 240_000)

  it.live("Ctrl-C during a generation stops llama.cpp at once: the log ends with Terminated(cancelled), no answer recorded", () =>
    Effect.gen(function*() {
      const box = sandbox()
      // A goal of 25,000 characters: with the tools, a prompt of some 37,000 byte tokens, whose
      // evaluation alone takes about 30 s on one thread (unstopped, the first answer came after
      // 30.7 s here; longer on a busier machine), so a stop within a fraction of it shows the abort
      // reached llama.cpp, however loaded the machine.
      const goal = `read hello.txt. ${"Then think about it. ".repeat(1_200)}`
      const wide = local(box).map((arg) => (arg === "16384" ? "40960" : arg))
      const running = start(["run", ...wide, "--max-output-tokens", "1000", "--prompt-budget", "120000", "--tools", "read_file,list_dir", "--json", goal])
      // The model is loaded before the goal is submitted: the first answer is under way.
      yield* until(() => running.output().stdout.includes("GoalSubmitted"), "the goal's submission")
      yield* Effect.sleep("500 millis")
      const interrupted = Date.now()
      running.kill("SIGINT")
      const ran = yield* Effect.promise(() => running.done)
      const stopped = Date.now() - interrupted
      expect(stopped, `stopped ${stopped} ms after Ctrl-C`).toBeLessThan(8_000)
      expect(ran.code).toBe(7)
      const lines = jsonLines(ran.stdout)
      expect(lines.map((e) => e["_tag"])).toEqual(["GoalSubmitted", "CancelRequested", "Terminated"])
      expect(lines.at(-1)).toMatchObject({ reason: "cancelled", detail: "cancelled by Ctrl-C" })
    }), 60_000)

  it.live("a missing file, a file that is not GGUF, one larger than memory, a broken vocabulary, a cut one: one line on stderr, exit 1, no database", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const text = join(models, "notes.gguf")
      writeFileSync(text, "# not a model\n")
      const huge = join(models, "huge.gguf")
      writeFileSync(huge, tinyGguf().subarray(0, 64))
      truncateSync(huge, totalmem() * 2)
      const holes = join(models, "holes.gguf")
      writeTinyGguf(holes, { withoutBytes: [0x7b] })
      const cut = join(models, "cut.gguf")
      writeFileSync(cut, tinyGguf().subarray(0, 20_000))
      const cases: ReadonlyArray<readonly [string, RegExp]> = [
        [join(models, "nope.gguf"), /^rx: no model file at .*nope\.gguf\n$/],
        [text, /^rx: .*notes\.gguf is not a GGUF model file \(a GGUF file starts with "GGUF"; this one starts with "# no"\)\n$/],
        [huge, /^rx: the model file .*huge\.gguf is [\d.]+ GB, more than this machine's [\d.]+ GB of memory: use a smaller or more quantized model\n$/],
        [cut, /^rx: llama\.cpp cannot load .*cut\.gguf: .*tensor 'token_embd\.weight' data is not within the file bounds, model is corrupted or incomplete\n$/],
        [holes, /^rx: .*holes\.gguf has a byte-fallback vocabulary with 255 of its 256 byte tokens: llama\.cpp would abort on text it cannot spell, so rx does not run it\n$/]
      ]
      for (const [file, message] of cases) {
        const ran = yield* rx(["run", ...local(box).map((arg) => (arg === model ? file : arg)), "anything"])
        expect(ran.stderr).toMatch(message)
        expect(ran.code).toBe(1)
        expect(ran.stdout).toBe("")
        expect(existsSync(box.db)).toBe(false)
      }
    }), 60_000)
})
