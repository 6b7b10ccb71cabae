/**
 * The kernel's `LanguageModel` inside the process: a GGUF file run by llama.cpp through
 * node-llama-cpp, with no server. Every answer is sampled under the grammar of one JSON action
 * among the offered tools (`Grammar`), and the kernel decodes it from the text as it decodes
 * @rx/llm's JSON mode. node-llama-cpp is loaded when the Layer is built, not when this module is
 * imported, so importing @rx/llama never loads the native addon.
 */
import { Decode, LanguageModel, type Tool } from "@rx/kernel"
import { Context, Duration, Effect, Either, Layer, type Scope, Schema } from "effect"
import { open, stat } from "node:fs/promises"
import { totalmem } from "node:os"
import type * as NodeLlamaCpp from "node-llama-cpp"
import * as Conversation from "./Conversation.js"
import * as Grammar from "./Grammar.js"
import * as Install from "./Install.js"

const PositiveInt = Schema.Int.pipe(Schema.positive())

/** The model file and how to run it. */
export const Config = Schema.Struct({
  /** The GGUF file. */
  modelFile: Schema.String.pipe(Schema.filter((text) => text.trim() !== "" || "expected the path of a GGUF file, got an empty value")),
  /** CPU threads; default the CPU's math cores as llama.cpp counts them. */
  threads: Schema.optional(PositiveInt.pipe(Schema.lessThanOrEqualTo(1024))),
  /** Tokens of context (prompt and answer); default 16384, or the model's own if smaller. */
  contextSize: Schema.optional(Schema.Int.pipe(Schema.between(256, 4_194_304))),
  /** Tokens of one answer at most; default a quarter of the context. An answer cut off is never executed. */
  maxTokens: Schema.optional(PositiveInt),
  /** Sampling temperature; 0 always takes the likeliest token. */
  temperature: Schema.optionalWith(Schema.Number.pipe(Schema.between(0, 2)), { default: () => 0.8 }),
  /**
   * Sampling seed, for repeatable answers: each answer's seed is derived from it and the prompt, so
   * the same prompt gets the same answer and different prompts different draws. Default a new one each time.
   */
  seed: Schema.optional(Schema.Int.pipe(Schema.between(0, 4_294_967_295))),
  /** Use a GPU when node-llama-cpp finds one (CUDA, Vulkan, Metal); `false` keeps to the CPU. */
  gpu: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  /** The whole `generate`, prompt and answer; none by default (the answer is bounded by `maxTokens`). */
  timeoutMs: Schema.optional(PositiveInt),
  /**
   * The command that installs node-llama-cpp where this program loads it from (`Install.hint`),
   * said when it did not load; default the command for a program installed in npm's global prefix.
   */
  installHint: Schema.optional(Schema.String)
})
export type Config = typeof Config.Type

/** What `layer` takes: a `Config` where the defaulted fields may be left out. */
export type Input = Schema.Struct.Constructor<typeof Config.fields>

/** The configuration does not make sense; the message says what is wrong, on one line. */
export class InvalidConfig extends Schema.TaggedError<InvalidConfig>()("@rx/llama/InvalidConfig", {
  message: Schema.String
}) {}

/**
 * Why the model could not be loaded: no such file, a file that cannot be read or is not GGUF, a
 * model too large for this machine's memory, no llama.cpp runtime here (node-llama-cpp missing,
 * or no binary for this machine), a byte-fallback vocabulary that lacks byte tokens (llama.cpp
 * would abort the process on the first character it cannot spell), or llama.cpp refused the file.
 */
export const LoadFailure = Schema.Literal("missing", "unreadable", "not_gguf", "too_large", "no_runtime", "vocabulary", "failed")
export type LoadFailure = typeof LoadFailure.Type

/** The model could not be loaded; the message is one line a user can act on. */
export class LoadError extends Schema.TaggedError<LoadError>()("@rx/llama/LoadError", {
  message: Schema.String,
  file: Schema.String,
  reason: LoadFailure
}) {}

/** What was loaded, and how it runs. */
export interface Loaded {
  readonly file: string
  /** `file`: the chat template in the GGUF file; `fallback`: none there (or it failed), so `GeneralChatWrapper`. */
  readonly template: "file" | "fallback"
  /** The node-llama-cpp chat wrapper in use (`Jinja` for the file's own template, or its built-in equivalent). */
  readonly chatWrapper: string
  readonly contextSize: number
  readonly maxTokens: number
  readonly threads: number
  /** The GPU in use, or `false` for the CPU alone. */
  readonly gpu: string | false
  /** Byte tokens banned from answers: those of bytes 0x80 to 0xFF (see the README). */
  readonly bannedTokens: number
}

/** The model as a service: the kernel's `LanguageModel`, and what was loaded. */
export interface Model extends LanguageModel.Service {
  readonly loaded: Loaded
}

/** The context when neither the setting nor the model says less. */
export const defaultContextSize = 16_384

const validateConfig = Decode.validated(Config, (problems) => new InvalidConfig({ message: `invalid local model configuration: ${problems}` }))

/** Check an input and fill in the defaults. */
export const config = (input: Input): Effect.Effect<Config, InvalidConfig> =>
  validateConfig(Config.make(input, { disableValidation: true }))

/** Text on one line, at most `max` characters. */
const oneLine = (text: string, max = 200): string => {
  const line = text.replace(/\s+/g, " ").trim()
  return line.length > max ? `${line.slice(0, max)}...` : line
}

const messageOf = (error: unknown): string => oneLine(error instanceof Error ? error.message : String(error))

const gigabytes = (bytes: number) => `${(bytes / 1024 ** 3).toFixed(1)} GB`

/**
 * The file as far as rx can tell before llama.cpp reads it: a regular, readable file, GGUF by its
 * magic and version, and not larger than this machine's memory. Its size.
 */
export const checkFile = (file: string): Effect.Effect<number, LoadError> =>
  Effect.gen(function*() {
    const fail = (reason: LoadFailure, message: string) => Effect.fail(new LoadError({ message, file, reason }))
    const info = yield* Effect.tryPromise({
      try: () => stat(file),
      catch: (error) =>
        hasCode(error, "ENOENT") || hasCode(error, "ENOTDIR")
          ? new LoadError({ message: `no model file at ${file}`, file, reason: "missing" })
          : new LoadError({ message: `cannot read the model file ${file}: ${messageOf(error)}`, file, reason: "unreadable" })
    })
    if (!info.isFile()) return yield* fail("unreadable", `the model file ${file} is not a regular file`)
    const header = yield* Effect.tryPromise({
      try: async () => {
        const handle = await open(file, "r")
        try {
          const buffer = Buffer.alloc(8)
          const { bytesRead } = await handle.read(buffer, 0, 8, 0)
          return buffer.subarray(0, bytesRead)
        } finally {
          await handle.close()
        }
      },
      catch: (error) => new LoadError({ message: `cannot read the model file ${file}: ${messageOf(error)}`, file, reason: "unreadable" })
    })
    if (header.length < 8 || header.subarray(0, 4).toString("latin1") !== "GGUF") {
      return yield* fail("not_gguf", `${file} is not a GGUF model file (a GGUF file starts with "GGUF"; this one starts with ${JSON.stringify(header.subarray(0, 4).toString("latin1"))})`)
    }
    const version = header.readUInt32LE(4)
    if (version !== 2 && version !== 3) return yield* fail("not_gguf", `${file} is GGUF version ${version}; llama.cpp reads versions 2 and 3`)
    if (info.size > totalmem()) {
      return yield* fail("too_large", `the model file ${file} is ${gigabytes(info.size)}, more than this machine's ${gigabytes(totalmem())} of memory: use a smaller or more quantized model`)
    }
    return info.size
  })

const hasCode = (error: unknown, code: string): boolean =>
  typeof error === "object" && error !== null && "code" in error && error.code === code

/** The module, loaded once the Layer is built: the native addon stays unloaded until a model is wanted. */
const loadRuntime = (file: string, installHint: string | undefined): Effect.Effect<typeof NodeLlamaCpp, LoadError> =>
  Effect.tryPromise({
    try: () => import("node-llama-cpp"),
    catch: (error) =>
      new LoadError({
        message: `cannot run ${file}: node-llama-cpp, which runs GGUF models, did not load (${messageOf(error)}); install it with: ${
          installHint ?? Install.hint({ _tag: "unknown" }, process.platform, process.arch)
        }`,
        file,
        reason: "no_runtime"
      })
  })

/**
 * Byte tokens (the fallback of SentencePiece vocabularies) for bytes from 0x80: a run of them
 * can spell invalid UTF-8 inside a JSON string, which would not survive decoding. They are never
 * sampled; characters with no token of their own can still be written as `\u` escapes.
 */
const bannedTokens = (model: NodeLlamaCpp.LlamaModel): ReadonlyArray<NodeLlamaCpp.Token> =>
  byteTokens(model).filter((token) => !/^[\x00-\x7f]*$/.test(model.detokenize([token])))

/** The vocabulary's byte tokens (`<0x00>` ... `<0xFF>` in SentencePiece vocabularies). */
const byteTokens = (model: NodeLlamaCpp.LlamaModel): ReadonlyArray<NodeLlamaCpp.Token> => {
  const found: Array<NodeLlamaCpp.Token> = []
  for (const token of model.iterateAllTokens()) {
    if (model.getTokenAttributes(token).byte) found.push(token)
  }
  return found
}

/**
 * A SentencePiece vocabulary spells what it has no token for with byte tokens (`<0x00>` ...
 * `<0xFF>`); llama.cpp aborts the whole process (an uncaught C++ exception, while loading or on the
 * first text it cannot spell) when one is missing. Such a file is refused from its metadata, read
 * in JavaScript, before llama.cpp sees it.
 */
const checkVocabulary = (runtime: typeof NodeLlamaCpp, file: string): Effect.Effect<void, LoadError> =>
  Effect.gen(function*() {
    const info = yield* Effect.tryPromise({
      try: () => runtime.readGgufFileInfo(file, { readTensorInfo: false, sourceType: "filesystem", logWarnings: false }),
      catch: (error) => new LoadError({ message: `cannot read the GGUF metadata of ${file}: ${messageOf(error)}`, file, reason: "not_gguf" })
    })
    const tokenizer: unknown = info.metadata.tokenizer?.ggml
    if (!isRecord(tokenizer) || tokenizer["model"] !== "llama") return
    const tokens = new Set(Array.isArray(tokenizer["tokens"]) ? tokenizer["tokens"] : [])
    const count = Array.from({ length: 256 }, (_, byte) => `<0x${byte.toString(16).toUpperCase().padStart(2, "0")}>`).filter((name) => tokens.has(name)).length
    if (count < 256) {
      return yield* new LoadError({
        message: `${file} has a byte-fallback vocabulary with ${count} of its 256 byte tokens: llama.cpp would abort on text it cannot spell, so rx does not run it`,
        file,
        reason: "vocabulary"
      })
    }
  })

const isRecord = (value: unknown): value is Readonly<Record<string, unknown>> => typeof value === "object" && value !== null

/**
 * A llama.cpp call whose failure is explained by its log, which node-llama-cpp delivers after the
 * promise has rejected: the error is made once the log has had a moment (a real timer, not the
 * Effect `Clock`, which a test may hold still).
 */
const afterLog = <A, E>(call: () => Promise<A>, onError: (error: unknown) => E): Effect.Effect<A, E> =>
  Effect.tryPromise({ try: call, catch: (error) => error }).pipe(
    Effect.catchAll((error) =>
      Effect.zipRight(
        Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 20))),
        Effect.suspend(() => Effect.fail(onError(error)))
      )
    )
  )

/** The chat wrapper of `model`: its file's template if it has one that works, else `GeneralChatWrapper`. */
const chatWrapper = (
  runtime: typeof NodeLlamaCpp,
  model: NodeLlamaCpp.LlamaModel
): { readonly wrapper: NodeLlamaCpp.ChatWrapper; readonly template: Loaded["template"] } => {
  const template: unknown = model.fileInfo.metadata.tokenizer?.chat_template
  const fromFile = typeof template === "string" && template.trim() !== ""
    ? Either.try(() => runtime.resolveChatWrapper(model, { warningLogs: false, fallbackToOtherWrappersOnJinjaError: false }))
    : Either.left(undefined)
  return Either.match(fromFile, {
    onLeft: () => ({ wrapper: new runtime.GeneralChatWrapper(), template: "fallback" as const }),
    onRight: (wrapper) => ({ wrapper, template: "file" as const })
  })
}

/** Prompt tokens evaluated per step: what an interruption may have to wait for. */
const chunk = 128

/** FNV-1a of `text`: a 32-bit hash, to derive each answer's seed from the prompt. */
const hash = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return h >>> 0
}

const finishReason = (stop: string): LanguageModel.FinishReason =>
  stop === "maxTokens" ? "length" : stop === "eogToken" || stop === "stopGenerationTrigger" || stop === "customStopTrigger" ? "stop" : "other"

/** The chat history node-llama-cpp takes, ending with the assistant turn to generate. */
const history = (turns: ReadonlyArray<Conversation.Turn>): Array<NodeLlamaCpp.ChatHistoryItem> => [
  ...turns.map((turn): NodeLlamaCpp.ChatHistoryItem =>
    turn.role === "system"
      ? { type: "system", text: turn.text }
      : turn.role === "user"
      ? { type: "user", text: turn.text }
      : { type: "model", response: [turn.text] }
  ),
  { type: "model", response: [] }
]

/**
 * Load the model, in the current scope: the file checked, node-llama-cpp loaded, the model and
 * one context created (disposed with the scope). Generations run one at a time.
 */
export const make = (input: Input): Effect.Effect<Model, InvalidConfig | LoadError, Scope.Scope> =>
  Effect.gen(function*() {
    const cfg = yield* config(input)
    const file = cfg.modelFile
    yield* checkFile(file)
    const runtime = yield* loadRuntime(file, cfg.installHint)
    yield* checkVocabulary(runtime, file)
    // llama.cpp's own log, kept quiet: its first error explains a failed load.
    // The first error llama.cpp logged since the last `explain`: the cause, where later lines only say that it failed.
    let firstError = ""
    const explain = (error: unknown) => {
      const said = firstError === "" ? messageOf(error) : firstError
      firstError = ""
      return said
    }
    const failed = (reason: LoadFailure, message: string) => new LoadError({ message, file, reason })
    const llama = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: () =>
          runtime.getLlama({
            gpu: cfg.gpu ? "auto" : false,
            // A prebuilt binary (an optional dependency of node-llama-cpp), or one built before: never a
            // build or a download in the middle of a run.
            build: "never",
            skipDownload: true,
            progressLogs: false,
            logLevel: runtime.LlamaLogLevel.error,
            logger: (level, message) => {
              if (level === runtime.LlamaLogLevel.error || level === runtime.LlamaLogLevel.fatal) {
                if (firstError === "") firstError = oneLine(message)
              }
            },
            ...(cfg.threads === undefined ? {} : { maxThreads: cfg.threads })
          }),
        catch: (error) =>
          error instanceof runtime.NoBinaryFoundError
            ? failed("no_runtime", `node-llama-cpp has no llama.cpp binary for this machine (${process.platform} ${process.arch}): build one from its bundled sources with its "source build" command`)
            : failed("no_runtime", `node-llama-cpp could not start llama.cpp: ${messageOf(error)}`)
      }),
      (llama) => Effect.ignore(Effect.tryPromise(() => llama.dispose()))
    )
    const tooLarge = (what: string) => failed("too_large", `${file} does not fit in this machine's memory (${what})`)
    const model = yield* Effect.acquireRelease(
      afterLog(
        () => llama.loadModel({ modelPath: file, ...(cfg.gpu ? {} : { gpuLayers: 0 }) }),
        (error) =>
          error instanceof runtime.InsufficientMemoryError
            ? tooLarge(messageOf(error))
            : failed("failed", `llama.cpp cannot load ${file}: ${explain(error)}`)
      ),
      (model) => Effect.ignore(Effect.tryPromise(() => model.dispose()))
    )
    const contextSize = cfg.contextSize ?? Math.min(defaultContextSize, model.trainContextSize > 0 ? model.trainContextSize : defaultContextSize)
    const threads = cfg.threads ?? Math.max(1, llama.cpuMathCores)
    const context = yield* Effect.acquireRelease(
      afterLog(
        () => model.createContext({ contextSize, threads, sequences: 1 }),
        (error) =>
          error instanceof runtime.InsufficientMemoryError
            ? tooLarge(`a context of ${contextSize} tokens: lower the context size`)
            : failed("failed", `llama.cpp cannot create a context of ${contextSize} tokens for ${file}: ${explain(error)}`)
      ),
      (context) => Effect.ignore(Effect.tryPromise(() => context.dispose()))
    )
    const { template, wrapper } = chatWrapper(runtime, model)
    const sequence = context.getSequence()
    const chat = yield* Effect.acquireRelease(
      Effect.sync(() => new runtime.LlamaChat({ contextSequence: sequence, chatWrapper: wrapper })),
      (chat) => Effect.sync(() => chat.dispose())
    )
    const banned = bannedTokens(model)
    const bias = new runtime.TokenBias(model.tokenizer)
    for (const token of banned) bias.set(token, "never")
    const maxTokens = Math.min(cfg.maxTokens ?? Math.floor(contextSize / 4), contextSize - 1)
    const loaded: Loaded = {
      file,
      template,
      chatWrapper: wrapper.wrapperName,
      contextSize,
      maxTokens,
      threads,
      gpu: llama.gpu,
      bannedTokens: banned.length
    }

    const modelError = (message: string, permanent?: boolean) =>
      new LanguageModel.ModelError({ message, server: file, ...(permanent === undefined ? {} : { permanent }) })

    // The grammar of each set of tools, built once (a run offers the same tools every time).
    const grammars = new Map<string, NodeLlamaCpp.LlamaGrammar>()
    const grammarFor = (tools: ReadonlyArray<Tool.Spec>) => {
      const key = JSON.stringify(tools)
      const known = grammars.get(key)
      if (known !== undefined) return Effect.succeed(known)
      return Effect.tryPromise({
        try: () => llama.createGrammar({ grammar: Grammar.action(tools) }),
        catch: (error) => modelError(`llama.cpp refused the grammar of these tools: ${messageOf(error)}`, true)
      }).pipe(Effect.tap((grammar) =>
        Effect.sync(() => {
          if (grammars.size >= 16) grammars.clear()
          grammars.set(key, grammar)
        })
      ))
    }

    /** Tokens of the prompt as the chat template writes it. */
    const promptTokens = (items: ReadonlyArray<NodeLlamaCpp.ChatHistoryItem>) =>
      Either.try({
        try: () => wrapper.generateContextState({ chatHistory: [...items] }).contextText.tokenize(model.tokenizer),
        catch: (error) => modelError(`the chat template of ${file} failed on this conversation: ${messageOf(error)}`, true)
      })

    /**
     * The prompt evaluated into the sequence `chunk` tokens at a time, from where it differs from
     * what the sequence holds (the previous answer's prompt is mostly a prefix of this one), all but
     * its last token: `LlamaChat` then finds it in place. node-llama-cpp checks the abort signal only
     * between generated tokens, so without this a long prompt would be evaluated to its end after
     * an interruption; now an interruption waits for one chunk at most.
     */
    const preload = async (tokens: ReadonlyArray<NodeLlamaCpp.Token>, signal: AbortSignal) => {
      const prefix = tokens.slice(0, -1)
      await sequence.adaptStateToTokens(prefix, false)
      for (let at = sequence.nextTokenIndex; at < prefix.length && !signal.aborted; at += chunk) {
        await sequence.evaluateWithoutGeneratingNewTokens(prefix.slice(at, at + chunk))
      }
    }

    /** One generation; interrupting it aborts llama.cpp's loop and waits until it has stopped. */
    const sample = (
      items: Array<NodeLlamaCpp.ChatHistoryItem>,
      tokens: ReadonlyArray<NodeLlamaCpp.Token>,
      grammar: NodeLlamaCpp.LlamaGrammar | undefined,
      seed: number | undefined
    ) =>
      Effect.async<{ readonly response: NodeLlamaCpp.LlamaChatResponse; readonly output: number }, LanguageModel.ModelError>((resume) => {
        const controller = new AbortController()
        let output = 0
        // An aborted signal makes `generateResponse` reject at once.
        const generation = preload(tokens, controller.signal).then(() => chat.generateResponse(items, {
          ...(grammar === undefined ? {} : { grammar }),
          signal: controller.signal,
          maxTokens,
          temperature: cfg.temperature,
          ...(seed === undefined ? {} : { seed }),
          // llama.cpp's own defaults; a repeat penalty would fight the JSON's own repetitions.
          topK: 40,
          topP: 0.95,
          minP: 0.05,
          repeatPenalty: false,
          tokenBias: bias,
          onToken: (generated) => {
            output += generated.length
          }
        }))
        generation.then(
          (response) => resume(Effect.succeed({ response, output })),
          (error) => resume(Effect.fail(modelError(`llama.cpp failed while answering: ${explain(error)}`)))
        )
        return Effect.promise(() => {
          controller.abort()
          return generation.then(() => undefined, () => undefined)
        })
      })

    const lock = yield* Effect.makeSemaphore(1)

    const generate = (request: LanguageModel.Request): Effect.Effect<LanguageModel.Response, LanguageModel.ModelError> =>
      Effect.gen(function*() {
        // A plain-text request (a summary) is sampled free, with no action grammar.
        const text = request.format === "text"
        const grammar = text ? undefined : yield* grammarFor(request.tools)
        const items = history(Conversation.turns(request))
        const tokens = yield* promptTokens(items)
        const prompt = tokens.length
        if (prompt + maxTokens > contextSize) {
          return yield* modelError(
            `the prompt is ${prompt} tokens and an answer may take ${maxTokens} more, past the context of ${contextSize} tokens: raise the context size (--context), or lower --prompt-budget or --max-output-tokens`
          )
        }
        const seed = cfg.seed === undefined ? undefined : (cfg.seed + hash(JSON.stringify(items))) >>> 0
        const { output, response } = yield* lock.withPermits(1)(sample(items, tokens, grammar, seed))
        return {
          text: response.response,
          toolCalls: [],
          finishReason: finishReason(response.metadata.stopReason),
          usage: { inputTokens: prompt, outputTokens: output },
          // The grammar asks for a JSON action: a rejection is worded for that form.
          ...(text ? {} : { format: "json_action" as const })
        }
      }).pipe((effect) =>
        cfg.timeoutMs === undefined ? effect : Effect.timeoutFail(effect, {
          duration: Duration.millis(cfg.timeoutMs),
          onTimeout: () => modelError(`${file} gave no complete answer within ${cfg.timeoutMs} ms`)
        })
      )

    return { generate, loaded }
  })

/** The loaded model, described; provided by `layer` beside the `LanguageModel`. */
export class LoadedModel extends Context.Tag("@rx/llama/LoadedModel")<LoadedModel, Loaded>() {}

/** The model as a Layer: loaded when the Layer is built, disposed when it is released. */
export const layer = (input: Input): Layer.Layer<LanguageModel.LanguageModel | LoadedModel, InvalidConfig | LoadError> =>
  Layer.scopedContext(
    Effect.map(make(input), (model) =>
      Context.make(LanguageModel.LanguageModel, LanguageModel.LanguageModel.of({ generate: model.generate })).pipe(
        Context.add(LoadedModel, model.loaded)
      ))
  )
