/**
 * All built-in tools, and the Layers that register them.
 *
 * ```ts
 * // The built-ins alone:
 * const tools = Builtins.layer({ workspace: "/path/to/project", sandbox: "auto" })
 * // The built-ins and your own tools (their requirements stay open for you to provide):
 * const tools = Builtins.layerWith({ workspace: "." }, [myTool])
 * // Or compose by hand: the services, then any list of tools.
 * const tools = ToolRegistry.layer([...Builtins.tools, myTool]).pipe(Layer.provide(Builtins.layerServices(config)))
 * ```
 *
 * The registries of `layer` and `layerWith` hold only the built-ins that are chosen (the config's
 * `tools`, default all) and can run here: in sandbox mode `auto` without a usable bubblewrap,
 * `shell` is left out rather than offered and then refused. `Availability`, which these Layers
 * also provide, lists what was left out and why, for a caller to tell its user.
 */
import { NodeFileSystem } from "@effect/platform-node"
import { Tool, ToolRegistry } from "@rx/kernel"
import { Context, Effect, Layer } from "effect"
import * as Config from "./Config.js"
import * as EditFile from "./EditFile.js"
import * as FindFiles from "./FindFiles.js"
import * as HttpFetch from "./HttpFetch.js"
import * as ListDir from "./ListDir.js"
import * as ReadFile from "./ReadFile.js"
import * as Sandbox from "./Sandbox.js"
import * as SearchText from "./SearchText.js"
import * as Shell from "./Shell.js"
import * as Workspace from "./Workspace.js"
import * as WriteFile from "./WriteFile.js"

/** The built-in tools, in the order the model sees them. */
export const tools = [
  ReadFile.tool,
  WriteFile.tool,
  EditFile.tool,
  ListDir.tool,
  FindFiles.tool,
  SearchText.tool,
  Shell.tool,
  HttpFetch.tool
] as const

/** One of the built-in tools. */
export type Builtin = (typeof tools)[number]

/** A chosen built-in tool that is not offered because it cannot run here, and why. */
export interface Unavailable {
  /** The tool's name, such as `shell`. */
  readonly tool: string
  /** Why it cannot run, and how to make it run (install bubblewrap, or choose sandbox mode `none`). */
  readonly reason: string
}

/**
 * Which built-in tools the Layers offer: the chosen ones that can run here, and the chosen ones
 * left out, each with its reason. Decided once, when the services are built.
 */
export class Availability extends Context.Tag("@rx/tools/Availability")<Availability, {
  /** The built-in tools offered, in the order the model sees them. */
  readonly tools: ReadonlyArray<Builtin>
  /** The chosen tools left out; empty when every chosen tool can run. */
  readonly unavailable: ReadonlyArray<Unavailable>
}>() {}

/** Why each chosen tool cannot run with this sandbox; only `shell` depends on the host. */
const availabilityOf = (config: Config.Config, sandbox: Sandbox.Sandbox): Availability["Type"] => {
  const chosen = config.tools ?? Config.toolNames
  const unavailable: Array<Unavailable> = []
  if (chosen.includes(Shell.tool.spec.name) && sandbox._tag === "Unavailable") {
    unavailable.push({ tool: Shell.tool.spec.name, reason: `the bubblewrap sandbox cannot be used: ${sandbox.reason}` })
  }
  return {
    tools: tools.filter((tool) => chosen.includes(tool.spec.name) && !unavailable.some((u) => u.tool === tool.spec.name)),
    unavailable
  }
}

/** What the built-in tools require. */
export type Services = Config.ToolsConfig | Workspace.Workspace | Shell.Shell | HttpFetch.HttpFetch

/** Why the built-ins cannot be set up. */
export type SetupError = Config.InvalidConfig | Workspace.InvalidWorkspace | Sandbox.SandboxUnavailable

/** The services of the built-in tools, on Node, from a config, and which of the tools can run. */
export const layerServices = (config: Config.Input): Layer.Layer<Services | Availability, SetupError> => {
  const configLayer = Config.layer(config)
  const workspaceLayer = Layer.unwrapEffect(
    Effect.map(Config.ToolsConfig, (decoded) => Workspace.layer(decoded.workspace))
  ).pipe(Layer.provide(NodeFileSystem.layer))
  const base = Layer.merge(configLayer, workspaceLayer.pipe(Layer.provide(configLayer)))
  const services = Layer.mergeAll(base, Layer.merge(Shell.layer, HttpFetch.layer).pipe(Layer.provide(base)))
  const availability = Layer.effect(
    Availability,
    Effect.zipWith(Config.ToolsConfig, Shell.Shell, (decoded, shell) => availabilityOf(decoded, shell.sandbox))
  )
  return Layer.provideMerge(availability, services)
}

/**
 * The chosen built-in tools that cannot run here with `config`, each with why: decided as the
 * Layers decide it, for a caller that wants to know before building them (an empty list when all
 * can run). Fails as the Layers do, for an invalid config or workspace, or mode `bwrap` without a
 * usable bubblewrap.
 */
export const unavailable = (config: Config.Input): Effect.Effect<ReadonlyArray<Unavailable>, SetupError> =>
  Effect.scoped(Effect.map(Layer.build(layerServices(config)), (context) => Context.get(context, Availability).unavailable))

/**
 * `tool`, refusing every call while the workspace's path does not lead to the folder the tools
 * were built for (moved, replaced, swapped for a link): a fatal failure of that call, recorded.
 */
const confined = <T extends Tool.Any>(tool: T, workspace: Workspace.Service): T => ({
  ...tool,
  run: (input, context) =>
    Effect.matchEffect(workspace.verify, {
      onFailure: (error) => Effect.succeed<Tool.Outcome>({ _tag: "Failure", error: { kind: "fatal", message: error.message } }),
      onSuccess: () => tool.run(input, context)
    })
})

/** The registry of the offered built-ins and `extra`, with the `Availability` it was built from. */
const registryLayer = <const Extra extends ReadonlyArray<Tool.Any>>(extra: Extra) =>
  Layer.effectContext(
    Effect.gen(function*() {
      const availability = yield* Availability
      const workspace = yield* Workspace.Workspace
      const registry = yield* ToolRegistry.make([...availability.tools, ...extra].map((tool) => confined(tool, workspace)))
      return Context.make(ToolRegistry.ToolRegistry, registry).pipe(Context.add(Availability, availability))
    })
  )

/**
 * A `ToolRegistry` with the built-in tools that are chosen and can run here, and the
 * `Availability` that says which were left out and why.
 */
export const layer = (
  config: Config.Input
): Layer.Layer<ToolRegistry.ToolRegistry | Availability, SetupError | ToolRegistry.InvalidToolset> =>
  registryLayer([]).pipe(Layer.provide(layerServices(config)))

/**
 * A `ToolRegistry` with the offered built-ins (as `layer`) and `extra` tools beside them. The
 * extra tools may also use the built-in services (`Workspace`, `Shell`, ...); anything else they
 * require is left for the caller to provide. Names must not clash with the built-ins (left out or
 * not) nor be `done`.
 */
export const layerWith = <const Extra extends ReadonlyArray<Tool.Any>>(
  config: Config.Input,
  extra: Extra
): Layer.Layer<
  ToolRegistry.ToolRegistry | Availability,
  SetupError | ToolRegistry.InvalidToolset,
  Exclude<Tool.Requirements<Extra>, Services | Availability>
> => {
  const clash = extra.find((tool) => Config.toolNames.includes(tool.spec.name))
  if (clash !== undefined) {
    return Layer.fail(
      new ToolRegistry.InvalidToolset({ message: `"${clash.spec.name}" is the name of a built-in tool; give yours another name` })
    )
  }
  // Requirements of the combined list: the built-ins' Services and the extra tools' own.
  return registryLayer(extra).pipe(Layer.provide(layerServices(config))) as Layer.Layer<
    ToolRegistry.ToolRegistry | Availability,
    SetupError | ToolRegistry.InvalidToolset,
    Exclude<Tool.Requirements<Extra>, Services | Availability>
  >
}
