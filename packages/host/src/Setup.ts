/**
 * From a command's flags to what a run needs: the settings (flag > environment > recorded >
 * workspace config file > user config file > default), the goal's text, its instructions, and
 * the Layers of the tools and the model, built before anything is recorded so a setting that
 * cannot work stops the command with one line and an untouched log.
 */
import { FileSystem, Path } from "@effect/platform"
import { OpenAiCompatible, Retry } from "@rx/llm"
import { Continuation, type LanguageModel, Options as RunOptions, Prompt, Runner, type StateStore, type Tool, ToolRegistry } from "@rx/kernel"
import type { McpTools } from "@rx/mcp"
import * as McpFlags from "@rx/mcp/Flags"
import type * as Servers from "@rx/mcp/Servers"
import { Builtins, Config, Confinement, Delegate, Sandbox } from "@rx/tools"
import { Console, Context, Effect, Either, Layer, Option, Redacted } from "effect"
import { existsSync, realpathSync } from "node:fs"
import { basename, resolve as resolvePath } from "node:path"
import { note, terminal } from "./Notes.js"
import * as Log from "./Log.js"
import * as Settings from "./Settings.js"
import type { Given } from "./Settings.js"
import { UsageError } from "./Settings.js"
import { version } from "./Version.js"

const noted = new Set<string>()
/** Say `line` on stderr, once per process. */
const noteOnce = (line: string) =>
  noted.has(line) ? Effect.void : Effect.andThen(Effect.sync(() => noted.add(line)), Console.error(line))

/** An MCP flag or config entry refused, as the command's usage error. */
const usage = <A, R>(effect: Effect.Effect<A, McpFlags.FlagError, R>) => Effect.mapError(effect, (error) => new UsageError({ message: error.message }))

/** The MCP servers of a new goal's flags (`McpFlags.given`): how each starts, and what the goal records of them. */
export const mcpGiven = (flags: McpFlags.McpFlags, configured: McpFlags.Configured) => usage(McpFlags.given(flags, configured))

/** The MCP servers a goal recorded, and how each starts now (`--mcp-env` given again). */
export const mcpRecorded = (recorded: Settings.Recorded, mcpEnv: ReadonlyArray<string>, configured: McpFlags.Configured) => {
  const servers = McpFlags.recorded(recorded.mcp)
  return Effect.map(usage(McpFlags.launch(servers, mcpEnv, configured)), (launch) => ({ servers, launch }))
}

/** The config files that apply in `workspace`, nearest first, each with what it holds (if it exists). */
export const configFiles = (workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const files = [[path.join(workspace, Settings.workspaceFile), "workspace"] as const, [yield* Settings.userConfigFile, "user"] as const]
    return yield* Effect.forEach(files, ([file, place]) =>
      Effect.gen(function*() {
        const nothing = { file, found: Option.none<Settings.Found>(), mcp: {} as Readonly<Record<string, Servers.Settings>> }
        if (!(yield* fs.exists(file).pipe(Effect.orElseSucceed(() => false)))) return nothing
        const info = yield* fs.stat(file).pipe(Effect.mapError((e) => new UsageError({ message: `cannot read config file ${file}: ${e.message}` })))
        if (info.type === "Directory" && (yield* fs.readDirectory(file).pipe(Effect.orElseSucceed(() => ["?"]))).length === 0) {
          // What rx before 0.3 could leave behind when killed mid-call: a mount point, not a setting.
          yield* noteOnce(`rx: ${file} is an empty folder, not a config file (an older rx, killed during a sandboxed call, could leave one): ignored; remove it`)
          return nothing
        }
        if (info.type !== "File" || Number(info.size) > 256 * 1024) {
          return yield* new UsageError({ message: `config file ${file}: not a regular file of at most 256 KiB` })
        }
        const text = yield* fs.readFileString(file).pipe(Effect.mapError((e) => new UsageError({ message: `cannot read config file ${file}: ${e.message}` })))
        const json = Either.try({ try: (): unknown => JSON.parse(text), catch: (e) => (e instanceof Error ? e.message : String(e)) })
        if (Either.isLeft(json)) return yield* new UsageError({ message: `config file ${file} is not valid JSON: ${json.left}` })
        const found = yield* Settings.fromFile(file, json.right, (relative) => path.resolve(path.dirname(file), relative), place)
        const raw: unknown = place === "user" && typeof json.right === "object" && json.right !== null ? Reflect.get(json.right, Settings.mcpServersKey) : undefined
        const mcp = yield* usage(McpFlags.configured(file, Settings.mcpServersKey, raw))
        return { file, found: Option.some(found), mcp }
      }))
  })

/** Only the entries of `found` whose keys are in `keys`. */
const only = (found: Settings.Found, keys: ReadonlyArray<Settings.Key>): Settings.Found =>
  Object.fromEntries(Object.entries(found).filter(([key]) => keys.some((k) => k === key))) as Settings.Found

/**
 * The settings of a command: `keys` are the ones it has; `recorded` what the goal being resumed
 * recorded. The workspace (never from a file) comes first, as its config file depends on it.
 */
export const resolve = (given: Given, keys: ReadonlyArray<Settings.Key>, recorded: Settings.Recorded = {}) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    const flags = Settings.fromGiven(given)
    const env = yield* Settings.fromEnv(keys.filter((key) => key !== "db"))
    // Everything the goal recorded applies (its tools and allow-list too), though not a flag of resume.
    const fromRecord = yield* Settings.fromRecorded(recorded, Settings.merge(flags, env), keys)
    const early = Settings.merge(flags, env, fromRecord)
    const workspace = path.resolve(early.workspace?.value ?? ".")
    const files = yield* configFiles(workspace)
    const fileValues = files.flatMap(({ found }) => (Option.isSome(found) ? [only(found.value, keys)] : []))
    const found = Settings.merge(flags, env, fromRecord, ...fileValues, {
      workspace: { value: workspace, source: early.workspace?.source ?? { _tag: "default" } }
    })
    // The MCP servers' settings come from the user's own file alone.
    const mcp = files.reduce<Readonly<Record<string, Servers.Settings>>>((all, file) => ({ ...file.mcp, ...all }), {})
    return { found, values: Settings.values(found), workspace, files, mcp }
  })

/**
 * What every command that runs goals starts from (`rx run`, `rx resume`, `rx fork`, `rx serve`,
 * `rx worker`, `rx run --cluster`), checked in this order before anything is made: its settings
 * (`resolve`; `recorded`, those of the goal it goes on with), the workspace (a folder), the model
 * (`modelName`; with `workers`, the goals run on a cluster's workers with theirs, so none is
 * needed here), then `volume` (a cluster's, found or made for the workspace), and the tools'
 * config (`toolsConfig`) with the log's files and the volume's file hidden. `tools` replaces the
 * settings' choice of tools (a resume offers the goal's own).
 */
export const prepare = <V extends { readonly file: string } | undefined = undefined>(
  db: Settings.Database,
  given: Given,
  keys: ReadonlyArray<Settings.Key>,
  options: {
    readonly recorded?: Settings.Recorded
    readonly workers?: boolean
    readonly tools?: ReadonlyArray<string>
    readonly volume?: (workspace: string) => Effect.Effect<V, UsageError, FileSystem.FileSystem | Path.Path>
  } = {}
) =>
  Effect.gen(function*() {
    const resolved = yield* resolve(given, keys, options.recorded)
    const { values, workspace } = resolved
    yield* existingWorkspace(workspace, resolved.found.workspace?.source._tag === "recorded")
    const model = options.workers === true ? values.model ?? "the workers'" : yield* modelName(values)
    // Without `options.volume`, V is `undefined`.
    const volume = (options.volume === undefined ? undefined : yield* options.volume(workspace)) as V
    const hide = [...(volume === undefined ? [] : [volume.file]), ...(yield* hidden(db, workspace))]
    const tools = yield* toolsConfig({ ...values, workspace, ...(options.tools === undefined ? {} : { tools: options.tools }) }, hide)
    return { ...resolved, model, tools, volume }
  })

/**
 * The workspace is a folder that exists: else one line saying so and what to do (never the
 * platform's `realPath`/`lstat` text). `recorded` says it came from the goal's log (a resume).
 */
export const existingWorkspace = (workspace: string, recorded = false) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const info = yield* Effect.either(fs.stat(workspace))
    const which = recorded ? "the goal's workspace" : "the workspace"
    const fix = recorded ? "restore it, or pass --workspace to go on in another folder" : "create it, or pass --workspace with an existing folder"
    if (Either.isLeft(info)) {
      const missing = info.left._tag === "SystemError" && info.left.reason === "NotFound"
      return yield* new UsageError({
        message: missing ? `${which} ${workspace} does not exist: ${fix}` : `${which} ${workspace} cannot be read (${info.left.message}): ${fix}`
      })
    }
    if (info.right.type !== "Directory") return yield* new UsageError({ message: `${which} ${workspace} is not a folder: ${fix}` })
  })

/**
 * What a goal records of the settings it runs with (its limits are in its options): the server
 * (without the user and password a base URL may hold: a resume takes them from --base-url or
 * RX_BASE_URL again) and mode, or the model file (as an absolute path) and how it runs.
 */
export const recordedSettings = (v: Partial<Settings.Values>, workspace: string, model: string): Settings.Recorded => ({
  workspace,
  sandbox: v.sandbox ?? "auto",
  ...(v.modelFile === undefined
    ? { baseUrl: Settings.withoutUserinfo(v.baseUrl ?? Settings.defaultBaseUrl) }
    : {
      modelFile: resolvePath(v.modelFile),
      ...(v.threads === undefined ? {} : { threads: v.threads }),
      ...(v.context === undefined ? {} : { context: v.context }),
      ...(v.seed === undefined ? {} : { seed: v.seed })
    }),
  model,
  ...(v.modelFile === undefined ? { mode: v.mode ?? "tools" } : {}),
  ...(v.temperature === undefined ? {} : { temperature: v.temperature }),
  ...(v.maxOutputTokens === undefined ? {} : { maxOutputTokens: v.maxOutputTokens }),
  ...(v.httpAllow === undefined ? {} : { httpAllow: v.httpAllow })
})

/** What a goal records of the tool settings alone (a cluster's workers run it with their own model). */
export const recordedTools = (v: Partial<Settings.Values>, workspace: string): Settings.Recorded => ({
  workspace,
  sandbox: v.sandbox ?? "auto",
  ...(v.httpAllow === undefined ? {} : { httpAllow: v.httpAllow })
})

/** The built-in tools' names. */
export const builtinNames: ReadonlyArray<string> = Builtins.tools.map((tool) => tool.spec.name)

/** Every tool `--tools` may name: the built-ins, and `delegate`, offered only when named. */
export const toolNamesKnown: ReadonlyArray<string> = [...builtinNames, Delegate.name]

/** Whether these settings offer `delegate` (sub-goals): only when `--tools` names it. */
export const delegates = (v: Partial<Settings.Values>): boolean => v.tools?.includes(Delegate.name) === true

/**
 * The tools config of these settings: the tools chosen (all by default), the log's files hidden
 * when they lie in the workspace, and the workspace's config file protected, so the agent can
 * never change the settings of a later run. What cannot run here is left out when it is built.
 */
export const toolsConfig = (v: Partial<Settings.Values>, hidden: ReadonlyArray<string>) =>
  Effect.map(
    v.tools === undefined ? Effect.succeed(builtinNames) : Settings.toolNames("tools", v.tools, toolNamesKnown),
    (named): Config.Input => {
      // `delegate` is the host's to add (`delegation`), not a built-in.
      const chosen = named.filter((name) => name !== Delegate.name)
      return {
        workspace: v.workspace ?? ".",
        sandbox: v.sandbox ?? "auto",
        httpAllow: v.httpAllow ?? [],
        protectedPaths: [".git", Settings.workspaceFile],
        hiddenPaths: hidden,
        tools: chosen.filter((name) => !(v.noShell === true && name === "shell"))
      }
    }
  )

/**
 * What the tools of `config` cannot offer here (shell in sandbox mode auto without a usable
 * bubblewrap), as notes to say at start; an error for a tool the user named (`strict`).
 */
const unavailableNotes = (config: Config.Input, missing: ReadonlyArray<Builtins.Unavailable>, strict: boolean) => {
  const named = strict ? missing.find((m) => config.tools?.includes(m.tool)) : undefined
  return named !== undefined
    ? new UsageError({ message: `--tools names ${named.tool}, which cannot run here: ${named.reason}` })
    : Effect.succeed(missing.filter((m) => config.tools?.includes(m.tool) ?? true).map((m) => `${m.tool} is not offered: ${m.reason}`))
}

/** The notes of `unavailableNotes` when the tools are built elsewhere (per workspace, by a server). */
export const toolNotes = (config: Config.Input, strict: boolean) =>
  Effect.flatMap(
    Builtins.unavailable(config).pipe(Effect.mapError((error) => new UsageError({ message: error.message }))),
    (missing) => unavailableNotes(config, missing, strict)
  )

/** Say each note on stderr (what is not offered and why), once, at the start of a run. */
export const tell = (notes: ReadonlyArray<string>) => Effect.forEach(notes, note, { discard: true })

/** Why the model Layer of a run could not be built: each says so in one line. */
export type ModelError = OpenAiCompatible.InvalidConfig | UsageError

/**
 * The model Layer of these settings: the GGUF file of `modelFile`, run in this process, or else
 * the server at the base URL. @rx/llama (and with it node-llama-cpp, a native addon) is loaded
 * only for a model file, so every other command works without it.
 */
export const modelLayer = (v: Partial<Settings.Values>, model: string): Layer.Layer<LanguageModel.LanguageModel, ModelError> =>
  v.modelFile !== undefined ? localModel(v, v.modelFile) : serverModel(v, model)

const localModel = (v: Partial<Settings.Values>, file: string): Layer.Layer<LanguageModel.LanguageModel, ModelError> =>
  Layer.unwrapEffect(
    Effect.tryPromise({
      try: () => import("@rx/llama"),
      catch: (error) => new UsageError({ message: `--model-file needs @rx/llama, which did not load: ${error instanceof Error ? error.message : String(error)}` })
    }).pipe(Effect.map(({ Install, LlamaCpp }) =>
      LlamaCpp.layer({
        modelFile: resolvePath(file),
        installHint: Install.hint(installedAt(Install), process.platform, process.arch),
        ...(v.threads === undefined ? {} : { threads: v.threads }),
        ...(v.context === undefined ? {} : { contextSize: v.context }),
        ...(v.maxOutputTokens === undefined ? {} : { maxTokens: v.maxOutputTokens }),
        ...(v.temperature === undefined ? {} : { temperature: v.temperature }),
        ...(v.seed === undefined ? {} : { seed: v.seed }),
        ...(v.timeout === undefined ? {} : { timeoutMs: v.timeout * 1000 })
      }).pipe(Layer.mapError((error) => new UsageError({ message: error.message })))
    ))
  )

/** How this program (`process.argv[1]`, its real path) was installed, for the command that installs node-llama-cpp beside it. */
const installedAt = (Install: typeof import("@rx/llama").Install) => {
  const entry = process.argv[1]
  if (entry === undefined) return { _tag: "unknown" } as const
  const real = Either.getOrElse(Either.try(() => realpathSync(entry)), () => entry)
  return Install.whereOf(real, { execPath: process.execPath, platform: process.platform, exists: (file) => existsSync(file) })
}

const serverModel = (v: Partial<Settings.Values>, model: string) =>
  OpenAiCompatible.layerNode({
    baseUrl: v.baseUrl ?? Settings.defaultBaseUrl,
    model,
    mode: v.mode ?? "tools",
    ...(v.apiKey === undefined ? {} : { apiKey: Redacted.make(v.apiKey) }),
    ...(v.temperature === undefined ? {} : { temperature: v.temperature }),
    ...(v.maxOutputTokens === undefined ? {} : { maxTokens: v.maxOutputTokens }),
    ...(v.timeout === undefined ? {} : { timeoutMs: v.timeout * 1000, idleTimeoutMs: Math.min(v.timeout * 1000, 300_000) }),
    ...(v.retries === undefined ? {} : { retry: { ...Retry.defaultPolicy, maxAttempts: v.retries + 1 } })
  })

/** The run options of these settings (only what was set; the kernel fills in the rest). */
export const runOptions = (v: Partial<Settings.Values>): RunOptions.Input => ({
  ...(v.maxIterations === undefined ? {} : { maxIterations: v.maxIterations }),
  ...(v.maxFailures === undefined ? {} : { maxConsecutiveFailures: v.maxFailures }),
  ...(v.maxMalformed === undefined ? {} : { maxMalformed: v.maxMalformed }),
  ...(v.maxRepeats === undefined ? {} : { maxRepeats: v.maxRepeats }),
  ...(v.noProgressWindow === undefined ? {} : { noProgressWindow: v.noProgressWindow }),
  ...(v.promptBudget === undefined ? {} : { promptBudget: v.promptBudget }),
  ...(v.compact === undefined ? {} : { compact: v.compact === "on" }),
  ...(v.maxTotalTokens === undefined ? {} : { maxTotalTokens: v.maxTotalTokens }),
  ...(v.maxCallsPerAnswer === undefined ? {} : { maxCallsPerAnswer: v.maxCallsPerAnswer }),
  ...(v.maxAnswerChars === undefined ? {} : { maxAnswerChars: v.maxAnswerChars }),
  ...(v.maxDepth === undefined ? {} : { maxDepth: v.maxDepth }),
  ...(v.maxChildren === undefined ? {} : { maxChildren: v.maxChildren }),
  ...(v.maxTreeGoals === undefined ? {} : { maxTreeGoals: v.maxTreeGoals }),
  ...(v.maxTreeIterations === undefined ? {} : { maxTreeIterations: v.maxTreeIterations })
})

/**
 * The Layers of a run, built now in `scope`: a setting the model adapter or the tools refuse
 * (a base URL that is no URL, an empty model name) fails here, before the log is touched. With
 * them, the tools offered and what to say about those that are not (see `unavailableNotes`).
 */
export const services = (v: Partial<Settings.Values>, model: string, tools: Config.Input, strict: boolean, mcp: Mcp = { servers: [], launch: {} }) =>
  Effect.gen(function*() {
    const source = yield* mcpTools(mcp, tools, v)
    const built = yield* Layer.build(Layer.merge(Builtins.layerWith(tools, source.tools), modelLayer(v, model))).pipe(
      Effect.mapError((error) => new UsageError({ message: error.message }))
    )
    const availability = Context.get(built, Builtins.Availability)
    const notes = yield* unavailableNotes(tools, availability.unavailable, strict)
    const layer: Layer.Layer<ToolRegistry.ToolRegistry | LanguageModel.LanguageModel> = Layer.succeedContext(built)
    return {
      layer,
      registry: Context.get(built, ToolRegistry.ToolRegistry),
      offered: availability.tools.map((tool) => tool.spec.name),
      notes: [...notes, ...source.notes],
      /** The MCP servers' tools offered, those their server marks destructive, and what they listed and were not offered. */
      mcp: { names: source.tools.map((tool) => tool.spec.name), ask: source.ask, leftOut: source.leftOut }
    }
  })

/**
 * How a run's sub-goals (`delegate`, when the goal is offered it) run: with the built-ins of
 * `tools`, made anew for a sub-goal in a folder of the workspace, and the run's hooks (each event
 * printed, approvals asked in place). `Delegate.drive` takes it.
 */
export const subGoals = (tools: Config.Input, hooks: Runner.Hooks): Delegate.Config => ({
  workspace: tools.workspace,
  protection: { protectedPaths: tools.protectedPaths ?? [".git"], hiddenPaths: tools.hiddenPaths ?? [] },
  // A sub-goal's tools hold the ancestors' guards as absolute paths, never resolved again in its folder.
  workspaceTools: (workspace, protection) =>
    Effect.map(Layer.build(Builtins.layer({ ...tools, workspace, ...protection })), (built) => Context.get(built, ToolRegistry.ToolRegistry)).pipe(
      Effect.mapError((error) => error.message)
    ),
  observe: hooks.observe,
  approve: hooks.approve
})

/** The MCP servers of a run, how each is started, and on resume the tools the goal recorded (kept as recorded). */
export interface Mcp {
  readonly servers: ReadonlyArray<Servers.Server>
  /** Each server's variables and start timeout: never recorded. */
  readonly launch: Readonly<Record<string, McpTools.Launch>>
  readonly pinned?: ReadonlyArray<Tool.Spec>
}

/**
 * The MCP servers' tools, started now and stopped with the scope: as the user (in the workspace),
 * or in bubblewrap for a server sandboxed on request (which then must be usable).
 */
export const mcpTools = (mcp: Mcp, tools: Config.Input, v: Partial<Settings.Values> = {}) =>
  Effect.gen(function*() {
    if (mcp.servers.length === 0) return { tools: [], ask: [], notes: [], leftOut: [] }
    const config = yield* Config.decode(tools).pipe(Effect.mapError((error) => new UsageError({ message: error.message })))
    const workspace = yield* Effect.try(() => realpathSync(config.workspace)).pipe(
      Effect.mapError(() => new UsageError({ message: `the workspace ${config.workspace} is not a folder rx can open` }))
    )
    const sandboxed = mcp.servers.find((server) => "command" in server && server.sandbox !== undefined)
    const sandbox = sandboxed === undefined ? undefined : yield* Sandbox.resolve("bwrap", workspace, config.bwrapPath).pipe(
      Effect.mapError((error) => new UsageError({ message: `MCP server ${sandboxed.name} is to run in the sandbox: ${error.message}` }))
    )
    const guards = Sandbox.guardsOf(workspace, config.protectedPaths, config.hiddenPaths)
    // The MCP client (and its SDK) is loaded only for a goal that has MCP servers.
    const { McpTools } = yield* Effect.promise(() => import("@rx/mcp"))
    return yield* McpTools.make(mcp.servers, {
      workspace,
      guards,
      launch: mcp.launch,
      version,
      ...(sandbox === undefined ? {} : { sandbox }),
      ...(v.mcpStartTimeout === undefined ? {} : { startTimeoutMs: v.mcpStartTimeout * 1_000 }),
      ...(v.mcpMaxTools === undefined ? {} : { maxTools: v.mcpMaxTools }),
      ...(v.mcpMaxSchema === undefined ? {} : { maxSchemaChars: v.mcpMaxSchema }),
      ...(mcp.pinned === undefined ? {} : { pinned: mcp.pinned })
    }).pipe(Effect.mapError((error) => new UsageError({ message: error.message })))
  })

/** Which model: set, else a model file's name, else the question a user can answer. */
export const modelName = (v: Partial<Settings.Values>) =>
  v.model !== undefined
    ? Effect.succeed(v.model)
    : v.modelFile !== undefined
    ? Effect.succeed(basename(v.modelFile))
    : new UsageError({
      message: "which model? pass --model (or set RX_MODEL, or \"model\" in a config file; rx config shows them), e.g. --model qwen2.5-coder:7b for Ollama, or --model-file FILE to run a GGUF file inside rx"
    })

/**
 * The log's files (the database and its `-wal`, `-shm` and `-journal` siblings) and the server
 * token beside it, those that lie inside the workspace, as the tools' `hiddenPaths`: every file
 * tool refuses them and the sandbox hides them, so the agent can neither read nor rewrite its own
 * record, nor act as a client of the server. Compared by real paths, so a symlinked workspace or
 * folder does not hide the overlap.
 */
export const hidden = (db: Settings.Database, workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const real = (p: string) => fs.realPath(p).pipe(Effect.orElseSucceed(() => path.resolve(p)))
    const root = yield* real(workspace)
    const located = (file: string) => Effect.map(real(path.dirname(file)), (folder) => path.join(folder, path.basename(file)))
    const log = db.postgres ? [] : ["", "-wal", "-shm", "-journal"].map((suffix) => `${db.file}${suffix}`)
    const files = yield* Effect.forEach([...log, yield* Log.tokenFile(db)], located)
    return files.filter((file) => Confinement.below(root, file))
  })

/** The flags of a command's settings (`Settings`). */
export type { Given }

/** A goal (file or standard input) may be at most this many bytes. */
const maxGoalBytes = 1024 * 1024
/** Instruction files larger than this are refused: they would only be cut in every prompt. */
export const maxInstructionBytes = 256 * 1024

/** Read a text file of at most `maxBytes`, or fail with one line saying why. */
export const readText = (file: string, what: string, maxBytes: number) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const why = (error: { readonly _tag: string; readonly reason?: string; readonly message: string }) =>
      new UsageError({
        message: `cannot read ${what} ${file}: ${error._tag === "SystemError" && error.reason === "NotFound" ? "no such file" : error._tag === "SystemError" && error.reason === "PermissionDenied" ? "permission denied" : error.message}`
      })
    const info = yield* fs.stat(file).pipe(Effect.mapError(why))
    if (info.type !== "File") return yield* new UsageError({ message: `cannot read ${what} ${file}: not a regular file` })
    if (Number(info.size) > maxBytes) {
      return yield* new UsageError({ message: `${what} ${file} is ${info.size} bytes; it may be at most ${maxBytes} bytes` })
    }
    const text = yield* fs.readFileString(file).pipe(Effect.mapError(why))
    if (text.includes("\u0000")) return yield* new UsageError({ message: `cannot read ${what} ${file}: not a text file` })
    return text
  })

/** Standard input as text, at most `maxGoalBytes`. */
const readStdin: Effect.Effect<string, UsageError> = Effect.async<string, UsageError>((resume) => {
  const chunks: Array<Buffer> = []
  let size = 0
  const onData = (chunk: Buffer) => {
    size += chunk.length
    if (size > maxGoalBytes) {
      cleanup()
      resume(Effect.fail(new UsageError({ message: `the goal on standard input is more than ${maxGoalBytes} bytes` })))
    } else chunks.push(chunk)
  }
  const onEnd = () => {
    cleanup()
    resume(Effect.succeed(Buffer.concat(chunks).toString("utf8")))
  }
  const onError = (error: Error) => {
    cleanup()
    resume(Effect.fail(new UsageError({ message: `cannot read the goal from standard input: ${error.message}` })))
  }
  const cleanup = () => {
    process.stdin.off("data", onData).off("end", onEnd).off("error", onError)
    process.stdin.pause()
  }
  process.stdin.on("data", onData).on("end", onEnd).on("error", onError)
  return Effect.sync(cleanup)
})

/**
 * The goal's text: the argument, `--goal-file`, or standard input for `-`. Refused when empty,
 * or longer than a prompt shows of it with these options (it would be cut in every prompt).
 */
export const goalText = (arg: Option.Option<string>, file: Option.Option<string>, options: RunOptions.Input) =>
  Effect.gen(function*() {
    const path = yield* Path.Path
    if (Option.isSome(arg) && Option.isSome(file)) return yield* new UsageError({ message: "give the goal once: as an argument or with --goal-file, not both" })
    const text = Option.isSome(file)
      ? yield* readText(path.resolve(file.value), "the goal file", maxGoalBytes)
      : Option.isSome(arg)
      ? arg.value === "-"
        ? yield* (process.stdin.isTTY === true ? new UsageError({ message: "rx run - reads the goal from standard input, which is a terminal: pipe the goal in (echo \"...\" | rx run -), or use --goal-file FILE" }) : readStdin)
        : arg.value
      : yield* new UsageError({ message: "rx run needs a goal: rx run \"<goal>\", rx run --goal-file FILE, or rx run - (the goal from standard input)" })
    const goal = text.trim()
    const from = Option.isSome(file) ? `the goal file ${file.value}` : Option.isSome(arg) && arg.value === "-" ? "standard input" : "the goal"
    if (goal === "") return yield* new UsageError({ message: `${from} is empty: say what to achieve` })
    const decoded = yield* RunOptions.decode(options).pipe(Effect.mapError((error) => new UsageError({ message: error.message })))
    const limit = Prompt.maxGoalChars(decoded)
    if (goal.length > limit) {
      return yield* new UsageError({
        message: `the goal is ${goal.length} characters, more than a prompt shows of it (${limit} with --prompt-budget ${decoded.promptBudget}): shorten it, put the details in a file the agent reads, or raise --prompt-budget`
      })
    }
    return goal
  })

/**
 * How `rx run` records its goal, checked before anything else is said: the goal's text
 * (`goalText`) with the workspace's instructions (`instructionsOf`, read only for a new goal), or,
 * with `continues`, a continuation of that ended goal, which takes its text and instructions and
 * has the argument, if any, as its new instruction. The Effect returned records it.
 */
/** Records a goal; its id. */
export type Submit = (observe?: Runner.Observer) => Effect.Effect<string, Runner.RunError | UsageError, ToolRegistry.ToolRegistry | StateStore.StateStore>

export const submission = (
  db: Settings.Database,
  request: { readonly goal: Option.Option<string>; readonly goalFile: Option.Option<string>; readonly continues?: Option.Option<string> | undefined },
  options: RunOptions.Input,
  instructionsOf: Effect.Effect<string, UsageError, FileSystem.FileSystem | Path.Path>
): Effect.Effect<Submit, UsageError, FileSystem.FileSystem | Path.Path> =>
  Effect.gen(function*() {
    const continued = Option.getOrUndefined(request.continues ?? Option.none())
    if (continued === undefined) {
      const goal = yield* goalText(request.goal, request.goalFile, options)
      const instructions = yield* instructionsOf
      return (observe?: Runner.Observer) =>
        Runner.submit({ goal, options, ...(observe === undefined ? {} : { observe }), ...(instructions === "" ? {} : { instructions }) })
    }
    return (observe?: Runner.Observer) =>
      Continuation.submit({ goalId: continued, text: Option.getOrUndefined(request.goal), options, ...(observe === undefined ? {} : { observe }) }).pipe(
        Effect.catchTags({
          "@rx/kernel/GoalNotFound": () => Log.noGoal(continued, db),
          "@rx/kernel/NotContinuable": (error) => new UsageError({ message: error.message })
        })
      )
  })

/**
 * The run's instructions: AGENTS.md at the workspace root when `agentsMd` asks for it (a note
 * when there is none), then the `instructions` file. Nothing is read unless asked.
 */
export const instructions = (v: Partial<Settings.Values>, workspace: string) =>
  Effect.gen(function*() {
    const fs = yield* FileSystem.FileSystem
    const path = yield* Path.Path
    const parts: Array<string> = []
    if (v.agentsMd === true) {
      const agents = path.join(workspace, "AGENTS.md")
      if (yield* fs.exists(agents).pipe(Effect.orElseSucceed(() => false))) parts.push(yield* readText(agents, "AGENTS.md", maxInstructionBytes))
      else yield* Console.error(terminal(`rx: note: --agents-md: there is no AGENTS.md at the workspace root (${agents}); running without it`))
    }
    if (v.instructions !== undefined) parts.push(yield* readText(path.resolve(v.instructions), "the --instructions file", maxInstructionBytes))
    const text = parts.map((part) => part.trim()).filter((part) => part !== "").join("\n\n")
    const shown = Math.floor((v.promptBudget ?? RunOptions.defaults.promptBudget) / 4)
    if (text.length > shown) {
      yield* Console.error(`rx: note: the instructions are ${text.length} characters; each prompt shows the first ${shown}`)
    }
    return text
  })
