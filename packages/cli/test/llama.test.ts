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
 * context that holds the byte-level prompt, and a seed whose first answer the tools' Schema refuses.
 */
const local = (box: ReturnType<typeof sandbox>) => [
  "--db", box.db, "--workspace", box.workspace, "--sandbox", "none",
  "--model-file", model, "--threads", "1", "--context", "16384", "--seed", "3"
]

describe("rx run --model-file", () => {
  it.live("a whole goal against the tiny model: only actions of the grammar, rejections recorded, suspends and resumes, ends recorded, inspects and replays", () =>
    Effect.gen(function*() {
      const box = sandbox()
      const first = yield* rx(["run", ...local(box), "--max-iterations", "4", "--tools", tools.join(","), "--ask", tools.join(","), "--json", "read hello.txt"])
      // stderr holds the approval hint and nothing of llama.cpp's own log.
      expect(first.stderr).toContain("waits for approval")
      expect(first.stderr).not.toMatch(/llama|ggml|gguf/i)
      const goalId = String(jsonLines(first.stdout)[0]?.["goalId"])
      // The seed's answers: one the Schema refuses, then a call that waits for approval.
      expect(first.code, first.stdout).toBe(11)
      let resumes = 0
      let last = first
      while (last.code === 11 && resumes < 6) {
        expect((yield* rx(["approve", goalId, "--db", box.db])).code).toBe(0)
        // The resume names no model: the goal's recorded model file, threads, context and seed.
        last = yield* rx(["resume", goalId, "--db", box.db, "--json"])
        expect(last.stderr).not.toMatch(/llama|ggml|gguf/i)
        resumes++
      }
      expect(resumes).toBeGreaterThan(0)

      const log = jsonLines((yield* rx(["events", goalId, "--db", box.db])).stdout)
      expect(log.map((e) => e["seq"])).toEqual(log.map((_, i) => i))
      const submitted = log[0] as Json
      const metadata = (submitted["options"] as Json)["metadata"] as Json
      expect(metadata).toMatchObject({ modelFile: model, threads: 1, context: 16384, seed: 3, model: "tiny.gguf" })
      expect(metadata["baseUrl"]).toBeUndefined()

      // Every answer is one JSON action naming an offered tool or done: the grammar allows nothing else.
      const answers = log.filter((e) => e["_tag"] === "ModelResponded").map((e) => (e["response"] as Json)["text"] as string)
      expect(answers.length).toBeGreaterThanOrEqual(2)
      for (const text of answers) {
        const action = JSON.parse(text) as Json
        expect([...tools, "done"]).toContain(action["tool"])
        expect(typeof action["input"]).toBe("object")
        expect(Object.keys(action).every((key) => ["thought", "tool", "input"].includes(key))).toBe(true)
      }
      // What the grammar allowed and a tool's Schema refused is a recorded rejection, never a bad action.
      const rejected = log.filter((e) => e["_tag"] === "ActionRejected")
      expect(rejected.length).toBeGreaterThan(0)
      for (const e of rejected) expect(e["kind"]).toBe("invalid_input")
      const started = log.filter((e) => e["_tag"] === "ToolStarted")
      expect(started.length).toBeGreaterThan(0)
      for (const e of started) expect(tools).toContain(e["tool"])
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

  it.live("Ctrl-C during a generation stops llama.cpp at once: the log ends with Terminated(cancelled), no answer recorded", () =>
    Effect.gen(function*() {
      const box = sandbox()
      // A goal of 6,300 characters: with the tools, a prompt of some 11,000 byte tokens, whose
      // evaluation alone takes several seconds on one thread (unstopped, the first answer comes
      // after about 5.5 s here), so a prompt stop shows that the abort reached llama.cpp.
      const goal = `read hello.txt. ${"Then think about it. ".repeat(300)}`
      const running = start(["run", ...local(box), "--tools", "read_file,list_dir", "--json", goal])
      // The model is loaded before the goal is submitted: the first answer is under way.
      yield* until(() => running.output().stdout.includes("GoalSubmitted"), "the goal's submission")
      yield* Effect.sleep("500 millis")
      const interrupted = Date.now()
      running.kill("SIGINT")
      const ran = yield* Effect.promise(() => running.done)
      const stopped = Date.now() - interrupted
      expect(stopped, `stopped ${stopped} ms after Ctrl-C`).toBeLessThan(2_000)
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
