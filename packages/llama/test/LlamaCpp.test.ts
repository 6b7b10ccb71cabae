/**
 * The Layer against a tiny GGUF model written by the test (random weights, byte vocabulary):
 * whatever such a model samples, the grammar makes it a JSON action the tools' own Schemas
 * accept; interruption stops llama.cpp's loop; a file that cannot be a model is one typed line.
 */
import { assert, describe, it } from "@effect/vitest"
import { Action, type LanguageModel, Tool, ToolRegistry } from "@rx/kernel"
import { Builtins } from "@rx/tools"
import { Duration, Effect, Either, Exit, Fiber, Schema } from "effect"
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from "node:fs"
import { totalmem, tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll } from "vitest"
import { Conversation, LlamaCpp, TinyGguf } from "../src/index.js"

const { tinyGguf, writeTinyGguf } = TinyGguf

const dir = mkdtempSync(join(tmpdir(), "rx-llama-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))
const model = join(dir, "tiny.gguf")
const size = writeTinyGguf(model)

/** Threads 1: on this machine's two cores, two threads are many times slower for a model this small. */
const tiny: LlamaCpp.Input = { modelFile: model, threads: 1, contextSize: 4096, maxTokens: 600, temperature: 1, seed: 7, gpu: false }

const Point = Schema.Struct({ x: Schema.Int, y: Schema.Int })
interface Tree {
  readonly name: string
  readonly children: ReadonlyArray<Tree>
}
const Tree: Schema.Schema<Tree> = Schema.Struct({
  name: Schema.String,
  children: Schema.Array(Schema.suspend((): Schema.Schema<Tree> => Tree)).pipe(Schema.maxItems(2))
}).annotations({ identifier: "Tree" })

const tool = <I, IE>(name: string, input: Schema.Schema<I, IE>) =>
  Tool.make({ name, description: `the ${name} tool`, input, output: Schema.Unknown, idempotent: true, execute: () => Effect.succeed(null) })

/** Tools whose inputs use what the grammar enforces: enums, integer ranges, booleans, optional keys, nesting, arrays, records, unions, a recursive type. */
const shaped = [
  tool("move", Schema.Struct({ direction: Schema.Literal("north", "south", "east", "west"), steps: Schema.Int.pipe(Schema.between(1, 5)), run: Schema.optional(Schema.Boolean) })),
  tool("plot", Schema.Struct({ points: Schema.Array(Point).pipe(Schema.minItems(1), Schema.maxItems(3)), label: Schema.optional(Schema.String.pipe(Schema.maxLength(8))) })),
  tool("tag", Schema.Struct({ tags: Schema.Record({ key: Schema.String, value: Schema.Boolean }), note: Schema.NullOr(Schema.String) })),
  tool("shape", Schema.Struct({ shape: Schema.Union(Schema.Struct({ kind: Schema.Literal("circle"), r: Schema.Number }), Schema.Struct({ kind: Schema.Literal("square"), side: Schema.Number })) })),
  tool("tree", Schema.Struct({ tree: Tree })),
  tool("page", Schema.Struct({ offset: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(1))), limit: Schema.optional(Schema.Int.pipe(Schema.greaterThanOrEqualTo(0))) }))
]

const request = (tools: ReadonlyArray<Tool.Any>, goal: string, offerDone = true): LanguageModel.Request => ({
  system: "You are a test.",
  messages: [{ role: "user", content: goal }],
  tools: [...tools.map((t) => t.spec), ...(offerDone ? [ToolRegistry.doneSpec] : [])]
})

/** The kernel's own decision on an answer, with each tool's Schema as the validator. */
/** Run `effect` for half a second, then interrupt it: its exit, and how long the interruption took (ms). */
const interruptedAfterHalfASecond = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(effect)
    yield* Effect.sleep(Duration.millis(500))
    const interrupting = Date.now()
    const exit = yield* Fiber.interrupt(fiber)
    return { exit, stopped: Date.now() - interrupting }
  })

const decide = (tools: ReadonlyArray<Tool.Any>, response: LanguageModel.Response) =>
  Action.decide(response, [...tools.map((t) => t.spec)], (name, input) => {
    const found = tools.find((t) => t.spec.name === name)
    return found === undefined ? Either.left(`no tool ${name}`) : found.decode(input)
  })

describe("LlamaCpp", () => {
  it.scopedLive("a plain-text request (a summary) is sampled free of the action grammar and its instructions", () =>
    Effect.gen(function*() {
      const summary: LanguageModel.Request = { system: "Summarise.", messages: [{ role: "user", content: "steps 1 to 3" }], tools: [], format: "text" }
      assert.deepStrictEqual(Conversation.turns(summary)[0], { role: "system", text: "Summarise." })
      const llm = yield* LlamaCpp.make({ ...tiny, maxTokens: 40 })
      const response = yield* llm.generate(summary)
      assert.strictEqual(response.format, undefined)
      assert.deepStrictEqual(response.toolCalls, [])
      assert.isTrue(response.usage.outputTokens > 0)
    }), 120_000)

  it("writes a tiny GGUF of about 470 kB", () => {
    assert.isTrue(size > 440_000 && size < 500_000, `${size} bytes`)
    assert.deepStrictEqual(tinyGguf(), tinyGguf(), "the same bytes from the same seed")
  })

  it.scopedLive("every answer under the grammar is an action the tools' Schemas accept", () =>
    Effect.gen(function*() {
      const llm = yield* LlamaCpp.make({ ...tiny, contextSize: 10_240 })
      assert.strictEqual(llm.loaded.template, "fallback")
      assert.strictEqual(llm.loaded.chatWrapper, "General")
      assert.strictEqual(llm.loaded.threads, 1)
      assert.strictEqual(llm.loaded.bannedTokens, 128, "the byte tokens 0x80-0xff")
      // Each shaped tool alone (so it is the one called), then the built-ins and done together; their
      // descriptions make a prompt of some 8,000 byte tokens, so fewer rounds of those.
      const builtins = Builtins.tools.filter((t) => t.spec.name !== "shell")
      const sets = [...shaped.map((t) => [[t], 3, false] as const), [builtins, 6, true] as const]
      for (const [s, [tools, rounds, offerDone]] of sets.entries()) {
        for (let i = 0; i < rounds; i++) {
          const response = yield* llm.generate(request(tools, `goal ${s}.${i}: do something`, offerDone))
          assert.deepStrictEqual(response.toolCalls, [])
          assert.isTrue(response.usage.inputTokens > 100 && response.usage.outputTokens > 0)
          if (response.finishReason === "length") {
            const cut = decide(tools, response)
            assert.isTrue(cut._tag === "Reject" && cut.kind === "cut_off")
            continue
          }
          assert.strictEqual(response.finishReason, "stop")
          const action: unknown = JSON.parse(response.text)
          assert.isTrue(Schema.is(Schema.Struct({ thought: Schema.optional(Schema.String), tool: Schema.String, input: Schema.Object }), { exact: true })(action), response.text)
          const decision = decide(tools, response)
          assert.isTrue(decision._tag === "Call" || decision._tag === "Done", `${decision._tag}: ${JSON.stringify(decision)}`)
          // A shaped tool offered alone (no done) is the one called.
          if (!offerDone) assert.isTrue(decision._tag === "Call" && decision.tool === tools[0]?.spec.name, JSON.stringify(decision))
          assert.isFalse(response.text.includes("\uFFFD"), "no invalid UTF-8")
        }
      }
      // Which answers complete within 600 tokens, and which tool or done the built-ins' rounds
      // call, depend on the CPU (llama.cpp picks its kernels by CPU features): not asserted.
    }))

  it.scopedLive("what the grammar allows and the tool's Schema refuses is a typed rejection, never a crash", () =>
    Effect.gen(function*() {
      // The grammar enforces string lengths but not patterns: it forces a code of 1 to 4
      // characters, which the pattern refuses, and no done is offered. So every answer, whatever
      // the weights, is rejected: invalid_input when complete, cut_off when the token limit cut it.
      const strict = tool("code", Schema.Struct({ code: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(4), Schema.pattern(/^$/)) }))
      const llm = yield* LlamaCpp.make({ ...tiny, maxTokens: 200 })
      for (let i = 0; i < 6; i++) {
        const response = yield* llm.generate(request([strict], `attempt ${i}`, false))
        const decision = decide([strict], response)
        assert.isTrue(decision._tag === "Reject", JSON.stringify(decision))
        if (decision._tag !== "Reject") continue
        if (response.finishReason === "length") {
          assert.strictEqual(decision.kind, "cut_off")
          continue
        }
        const action: unknown = JSON.parse(response.text)
        assert.isTrue(Schema.is(Schema.Struct({ thought: Schema.optional(Schema.String), tool: Schema.Literal("code"), input: Schema.Struct({ code: Schema.String }) }))(action), response.text)
        assert.strictEqual(decision.kind, "invalid_input")
        assert.match(decision.reason, /^invalid input for code: /)
      }
    }))

  it.scopedLive("an answer cut off by the token limit ends as length", () =>
    Effect.gen(function*() {
      const llm = yield* LlamaCpp.make({ ...tiny, maxTokens: 5 })
      const response = yield* llm.generate(request(shaped, "anything"))
      assert.strictEqual(response.finishReason, "length")
      assert.strictEqual(response.usage.outputTokens, 5)
      const decision = decide(shaped, response)
      assert.isTrue(decision._tag === "Reject" && decision.kind === "cut_off")
    }))

  it.scopedLive("the chat template comes from the file when it has one", () =>
    Effect.gen(function*() {
      const file = join(dir, "templated.gguf")
      const chatml = "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
      writeTinyGguf(file, { chatTemplate: chatml })
      const llm = yield* LlamaCpp.make({ ...tiny, modelFile: file })
      assert.strictEqual(llm.loaded.template, "file")
      assert.notStrictEqual(llm.loaded.chatWrapper, "General")
      const response = yield* llm.generate(request(shaped, "with a template"))
      assert.isTrue(response.finishReason === "length" || decide(shaped, response)._tag !== "Reject", response.text)
      // A template that does not parse: the documented fallback.
      const broken = join(dir, "broken-template.gguf")
      writeTinyGguf(broken, { chatTemplate: "{% for message in messages %}{{ message['content'] " })
      assert.strictEqual((yield* LlamaCpp.make({ ...tiny, modelFile: broken })).loaded.template, "fallback")
    }))

  it.scopedLive("interrupting a generation stops llama.cpp's loop, and the model answers again at once", () =>
    Effect.gen(function*() {
      // An input that takes at least 64 strings of 256 characters: 16,384 tokens and more, some 37 s
      // of generation on one thread here (about 440 tokens/s), longer on a busier machine.
      const long = tool("essay", Schema.Struct({ parts: Schema.Array(Schema.String.pipe(Schema.minLength(256))).pipe(Schema.minItems(64)) }))
      const llm = yield* LlamaCpp.make({ ...tiny, contextSize: 24_576, maxTokens: 20_000 })
      const { exit, stopped } = yield* interruptedAfterHalfASecond(llm.generate({ ...request([long], "write"), tools: [long.spec] }))
      assert.isTrue(Exit.isInterrupted(exit))
      // The interruption waits until the generation has stopped: that took a fraction of the whole
      // answer's time (the bounds leave room for a loaded machine, and are far below 37 s).
      assert.isTrue(stopped < 10_000, `stopped after ${stopped} ms`)
      const again = Date.now()
      const response = yield* llm.generate(request(shaped, "again"))
      assert.isTrue(Date.now() - again < 15_000 && response.text.startsWith("{"), `answered again after ${Date.now() - again} ms`)
    }))

  it.scopedLive("interrupting while a long prompt is evaluated stops within one chunk of it", () =>
    Effect.gen(function*() {
      // 20,000 characters: as many byte tokens, some ten seconds of evaluation on one thread here;
      // a chunk of 128 of them takes some 60 ms (the bound leaves room for a loaded machine).
      const llm = yield* LlamaCpp.make({ ...tiny, contextSize: 32_768, maxTokens: 1_000 })
      const { exit, stopped } = yield* interruptedAfterHalfASecond(llm.generate(request(shaped, "ponder. ".repeat(2_500))))
      assert.isTrue(Exit.isInterrupted(exit))
      assert.isTrue(stopped < 4_000, `stopped after ${stopped} ms`)
    }))

  it.scopedLive("a prompt that does not fit the context is a ModelError saying what to change", () =>
    Effect.gen(function*() {
      const llm = yield* LlamaCpp.make({ ...tiny, contextSize: 1024, maxTokens: 256 })
      const error = yield* Effect.flip(llm.generate(request(shaped, "x".repeat(2_000))))
      assert.strictEqual(error._tag, "@rx/kernel/ModelError")
      assert.match(error.message, /past the context of 1024 tokens: raise the context size \(--context\)/)
      assert.isUndefined(error.permanent)
    }))

  describe("a file that cannot be a model: one typed line", () => {
    const refused = (input: LlamaCpp.Input) => Effect.flip(Effect.scoped(LlamaCpp.make(input)))

    it.effect("missing", () =>
      Effect.gen(function*() {
        const error = yield* refused({ ...tiny, modelFile: join(dir, "nope.gguf") })
        assert.strictEqual(error._tag, "@rx/llama/LoadError")
        assert.isTrue(error._tag === "@rx/llama/LoadError" && error.reason === "missing")
        assert.strictEqual(error.message, `no model file at ${join(dir, "nope.gguf")}`)
      }))

    it.effect("a folder, or not GGUF", () =>
      Effect.gen(function*() {
        const text = join(dir, "notes.gguf")
        writeFileSync(text, "# not a model\n".repeat(10))
        const notGguf = yield* refused({ ...tiny, modelFile: text })
        assert.isTrue(notGguf._tag === "@rx/llama/LoadError" && notGguf.reason === "not_gguf", notGguf.message)
        assert.strictEqual(notGguf.message, `${text} is not a GGUF model file (a GGUF file starts with "GGUF"; this one starts with "# no")`)
        const folder = yield* refused({ ...tiny, modelFile: dir })
        assert.isTrue(folder._tag === "@rx/llama/LoadError" && folder.reason === "unreadable", folder.message)
        const v1 = join(dir, "v1.gguf")
        writeFileSync(v1, Buffer.concat([Buffer.from("GGUF"), Buffer.from([1, 0, 0, 0]), Buffer.alloc(64)]))
        const old = yield* refused({ ...tiny, modelFile: v1 })
        assert.strictEqual(old.message, `${v1} is GGUF version 1; llama.cpp reads versions 2 and 3`)
      }))

    it.effect("larger than this machine's memory", () =>
      Effect.gen(function*() {
        const huge = join(dir, "huge.gguf")
        writeFileSync(huge, tinyGguf().subarray(0, 64))
        // Sparse: no disk is used.
        truncateSync(huge, totalmem() * 2)
        const error = yield* refused({ ...tiny, modelFile: huge })
        assert.isTrue(error._tag === "@rx/llama/LoadError" && error.reason === "too_large", error.message)
        assert.match(error.message, /^the model file .* is [\d.]+ GB, more than this machine's [\d.]+ GB of memory: use a smaller or more quantized model$/)
      }))

    it.effect("GGUF on the outside, not on the inside", () =>
      Effect.gen(function*() {
        const cut = join(dir, "cut.gguf")
        writeFileSync(cut, tinyGguf().subarray(0, 20_000))
        const error = yield* refused({ ...tiny, modelFile: cut })
        assert.isTrue(error._tag === "@rx/llama/LoadError" && error.reason === "failed", error.message)
        assert.isFalse(error.message.includes("\n"))
        // The cause is llama.cpp's first logged error; in a process that loaded and disposed llama.cpp
        // before, its log no longer reaches rx, and node-llama-cpp's own message stands (the CLI test
        // checks the cause, in a fresh process).
        assert.match(error.message, /^llama\.cpp cannot load .*cut\.gguf: /, error.message)
      }))

    it.effect("a byte-fallback vocabulary without all its byte tokens: refused before llama.cpp could abort on it", () =>
      Effect.gen(function*() {
        const holes = join(dir, "holes.gguf")
        writeTinyGguf(holes, { withoutBytes: [0x0a, 0x41] })
        const error = yield* refused({ ...tiny, modelFile: holes })
        assert.isTrue(error._tag === "@rx/llama/LoadError" && error.reason === "vocabulary", error.message)
        assert.strictEqual(error.message, `${holes} has a byte-fallback vocabulary with 254 of its 256 byte tokens: llama.cpp would abort on text it cannot spell, so rx does not run it`)
      }))

    it.effect("a configuration that does not validate", () =>
      Effect.gen(function*() {
        const error = yield* refused({ ...tiny, threads: 0, temperature: 3 })
        assert.strictEqual(error._tag, "@rx/llama/InvalidConfig")
        assert.isFalse(error.message.includes("\n"))
        assert.match(error.message, /threads/)
        assert.match(error.message, /temperature/)
      }))
  })
})
