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
 */
import { NodeFileSystem } from "@effect/platform-node"
import { Tool, ToolRegistry } from "@rx/kernel"
import { Effect, Layer } from "effect"
import * as Config from "./Config.js"
import * as EditFile from "./EditFile.js"
import * as FindFiles from "./FindFiles.js"
import * as HttpFetch from "./HttpFetch.js"
import * as ListDir from "./ListDir.js"
import * as ReadFile from "./ReadFile.js"
import type * as Sandbox from "./Sandbox.js"
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

/** What the built-in tools require. */
export type Services = Config.ToolsConfig | Workspace.Workspace | Shell.Shell | HttpFetch.HttpFetch

/** Why the built-ins cannot be set up. */
export type SetupError = Config.InvalidConfig | Workspace.InvalidWorkspace | Sandbox.SandboxUnavailable

/** The services of the built-in tools, on Node, from a config. */
export const layerServices = (config: Config.Input): Layer.Layer<Services, SetupError> => {
  const configLayer = Config.layer(config)
  const workspaceLayer = Layer.unwrapEffect(
    Effect.map(Config.ToolsConfig, (decoded) => Workspace.layer(decoded.workspace))
  ).pipe(Layer.provide(NodeFileSystem.layer))
  const base = Layer.merge(configLayer, workspaceLayer.pipe(Layer.provide(configLayer)))
  return Layer.mergeAll(base, Layer.merge(Shell.layer, HttpFetch.layer).pipe(Layer.provide(base)))
}

/** A `ToolRegistry` with every built-in tool. */
export const layer = (
  config: Config.Input
): Layer.Layer<ToolRegistry.ToolRegistry, SetupError | ToolRegistry.InvalidToolset> =>
  ToolRegistry.layer(tools).pipe(Layer.provide(layerServices(config)))

/**
 * A `ToolRegistry` with the built-ins and `extra` tools beside them. The extra tools may also
 * use the built-in services (`Workspace`, `Shell`, ...); anything else they require is left
 * for the caller to provide. Names must not clash with the built-ins nor be `done`.
 */
export const layerWith = <const Extra extends ReadonlyArray<Tool.Any>>(
  config: Config.Input,
  extra: Extra
): Layer.Layer<
  ToolRegistry.ToolRegistry,
  SetupError | ToolRegistry.InvalidToolset,
  Exclude<Tool.Requirements<Extra>, Services>
> =>
  // Requirements of the combined list: the built-ins' Services and the extra tools' own.
  ToolRegistry.layer([...tools, ...extra]).pipe(Layer.provide(layerServices(config))) as Layer.Layer<
    ToolRegistry.ToolRegistry,
    SetupError | ToolRegistry.InvalidToolset,
    Exclude<Tool.Requirements<Extra>, Services>
  >
