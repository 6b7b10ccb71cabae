/**
 * `pnpm --filter @rx/bench run llama [--json]`: a model inside rx (@rx/llama, the tiny
 * random-weight GGUF of `TinyGguf`, one thread) beside the same run through a Chat Completions
 * server on 127.0.0.1 (@rx/llm in JSON mode against a small Node HTTP server that answers, at
 * once, the very texts the local model gave). Memory store, the `echo` tool.
 *
 * Figures: output tokens per second of generation (prompt evaluation included, as a run pays it),
 * and the per-iteration overhead: wall time per iteration less the time inside `generate`, which
 * for the server is the HTTP round trip itself.
 */
import { LanguageModel, Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { LlamaCpp, TinyGguf } from "@rx/llama"
import { OpenAiCompatible } from "@rx/llm"
import { Effect, Layer } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { round } from "./Figures.js"

const json = process.argv.includes("--json")
const log = (line: string) => {
  if (!json) process.stderr.write(`${line}\n`)
}

/** Iterations measured on each side (over as many goals as it takes: the random model may say done at once). */
const target = Number(process.env["RX_BENCH_LLAMA_ITERATIONS"] ?? 40)
const maxIterations = 8

interface Stats {
  generateMs: number
  calls: number
  inputTokens: number
  outputTokens: number
  readonly texts: Array<string>
}
const stats = (): Stats => ({ generateMs: 0, calls: 0, inputTokens: 0, outputTokens: 0, texts: [] })

/** `inner`, timed: what each `generate` took, its tokens and its text. */
const timed = (inner: Layer.Layer<LanguageModel.LanguageModel, unknown>, into: Stats) =>
  Layer.effect(
    LanguageModel.LanguageModel,
    Effect.map(LanguageModel.LanguageModel, (model) => ({
      generate: (request: LanguageModel.Request) =>
        Effect.suspend(() => {
          const started = performance.now()
          return Effect.tap(model.generate(request), (response) =>
            Effect.sync(() => {
              into.generateMs += performance.now() - started
              into.calls++
              into.inputTokens += response.usage.inputTokens
              into.outputTokens += response.usage.outputTokens
              into.texts.push(response.text)
            }))
        })
    }))
  ).pipe(Layer.provide(inner))

/** Goals of the benchmark until `iterations` are done (or `goals` goals, for the replayed side); wall ms and iterations. */
const goals = (model: Layer.Layer<LanguageModel.LanguageModel, unknown>, until: (iterations: number, goal: number) => boolean) =>
  Effect.gen(function*() {
    let iterations = 0
    let goal = 0
    const started = performance.now()
    while (until(iterations, goal)) {
      const result = yield* Runner.run({
        goal: `benchmark goal ${goal}: echo something`,
        goalId: `bench-${goal}`,
        options: { maxIterations, noProgressWindow: maxIterations + 1 }
      })
      iterations += result.iterations
      goal++
    }
    return { wallMs: performance.now() - started, iterations, goals: goal }
  }).pipe(Effect.provide(Layer.merge(ToolRegistry.layer([Tool.echo]), model)), Effect.provide(StateStore.layerMemory))

/** A Chat Completions server on 127.0.0.1 answering `texts` in order, each at once, with the local run's usage. */
const scriptedServer = (texts: ReadonlyArray<string>, usage: { readonly input: number; readonly output: number }) =>
  Effect.acquireRelease(
    Effect.async<Http.Server & { readonly url: string }>((resume) => {
      let index = 0
      const server = Http.createServer((request, response) => {
        request.resume()
        request.on("end", () => {
          const content = texts[index++ % texts.length] ?? ""
          response.writeHead(200, { "content-type": "application/json" })
          response.end(JSON.stringify({
            id: `chatcmpl-${index}`,
            object: "chat.completion",
            created: 0,
            model: "tiny",
            choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
            usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output }
          }))
        })
      })
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(Object.assign(server, { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1` }))))
    }),
    (server) =>
      Effect.async<void>((resume) => {
        server.close(() => resume(Effect.void))
      })
  )

const program = Effect.gen(function*() {
  const dir = mkdtempSync(join(tmpdir(), "rx-bench-llama-"))
  yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
  const file = join(dir, "tiny.gguf")
  TinyGguf.writeTinyGguf(file)

  log(`in process: ${file}, 1 thread, ${target} iterations`)
  const local = stats()
  const loadStarted = performance.now()
  const llama = yield* Layer.build(LlamaCpp.layer({ modelFile: file, threads: 1, contextSize: 8192, maxTokens: 512, temperature: 1, seed: 1, gpu: false }))
  const loadMs = performance.now() - loadStarted
  // A warm-up round (the kernel's code paths, llama.cpp's buffers), then the measured one.
  yield* goals(timed(Layer.succeedContext(llama), stats()), (iterations) => iterations < maxIterations)
  const inProcess = yield* goals(timed(Layer.succeedContext(llama), local), (iterations) => iterations < target)

  log(`server: the same ${local.calls} answers from 127.0.0.1`)
  const served = stats()
  const server = yield* scriptedServer(local.texts, { input: Math.round(local.inputTokens / local.calls), output: Math.round(local.outputTokens / local.calls) })
  const http = OpenAiCompatible.layerNode({ baseUrl: server.url, model: "tiny", mode: "json" })
  // The same goals, so the same answers in the same order: a warm-up round first, then the measured one.
  yield* goals(timed(http, stats()), (_, goal) => goal < inProcess.goals)
  const viaServer = yield* goals(timed(http, served), (_, goal) => goal < inProcess.goals)

  const overhead = (wallMs: number, generateMs: number, iterations: number) => round(((wallMs - generateMs) * 1000) / iterations, 0)
  return {
    model_bytes: TinyGguf.tinyGguf().length,
    load_ms: round(loadMs, 0),
    inprocess: {
      goals: inProcess.goals,
      iterations: inProcess.iterations,
      answers: local.calls,
      prompt_tokens_per_answer: round(local.inputTokens / local.calls, 0),
      output_tokens_per_answer: round(local.outputTokens / local.calls, 0),
      output_tokens_per_second: round(local.outputTokens / (local.generateMs / 1000), 0),
      ms_per_answer: round(local.generateMs / local.calls, 0),
      overhead_us_per_iteration: overhead(inProcess.wallMs, local.generateMs, inProcess.iterations)
    },
    server: {
      goals: viaServer.goals,
      iterations: viaServer.iterations,
      answers: served.calls,
      round_trip_us_per_answer: round((served.generateMs * 1000) / served.calls, 0),
      overhead_us_per_iteration: overhead(viaServer.wallMs, served.generateMs, viaServer.iterations),
      total_us_per_iteration: round((viaServer.wallMs * 1000) / viaServer.iterations, 0)
    }
  }
})

const figures = await Effect.runPromise(Effect.scoped(program))
if (json) process.stdout.write(`${JSON.stringify(figures)}\n`)
else {
  const { inprocess: l, server: s } = figures
  process.stdout.write(
    [
      `tiny GGUF ${figures.model_bytes} bytes, loaded in ${figures.load_ms} ms`,
      `in process: ${l.iterations} iterations in ${l.goals} goals; ${l.output_tokens_per_second} output tokens/s (${l.output_tokens_per_answer} per answer, prompt ${l.prompt_tokens_per_answer} tokens, ${l.ms_per_answer} ms per answer); overhead ${l.overhead_us_per_iteration} us/iteration beside generation`,
      `server on 127.0.0.1: ${s.iterations} iterations; HTTP round trip ${s.round_trip_us_per_answer} us per answer; overhead ${s.overhead_us_per_iteration} us/iteration beside it; ${s.total_us_per_iteration} us/iteration in all`
    ].join("\n") + "\n"
  )
}
