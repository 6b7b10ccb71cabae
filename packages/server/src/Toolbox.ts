/**
 * The tools of each goal. Goals submitted over HTTP each have their own workspace (a folder
 * inside the server's root), so the server asks the `Toolbox` for a `ToolRegistry` per
 * workspace, when a goal is submitted (its tool specs are recorded) and each time it runs.
 */
import { ToolRegistry } from "@rx/kernel"
import { Builtins, type Config as ToolsConfig } from "@rx/tools"
import { Context, Effect, Layer, Schema, type Scope } from "effect"

/** The tools for a workspace could not be set up (an invalid config, a sandbox that is required but unusable). */
export class ToolboxError extends Schema.TaggedError<ToolboxError>()("@rx/server/ToolboxError", {
  workspace: Schema.String,
  message: Schema.String
}) {}

export interface Service {
  /** The registry of goals working in `workspace` (an absolute path inside the root), for as long as the scope lasts. */
  readonly registry: (workspace: string) => Effect.Effect<ToolRegistry.Service, ToolboxError, Scope.Scope>
}

export class Toolbox extends Context.Tag("@rx/server/Toolbox")<Toolbox, Service>() {}

/** A toolbox from any registry Layer built per workspace (your own tools, test tools). */
export const make = <E extends { readonly message: string }>(
  build: (workspace: string) => Layer.Layer<ToolRegistry.ToolRegistry, E>
): Service =>
  Toolbox.of({
    registry: (workspace) =>
      Layer.build(build(workspace)).pipe(
        Effect.map((context) => Context.get(context, ToolRegistry.ToolRegistry)),
        Effect.mapError((error) => new ToolboxError({ workspace, message: error.message }))
      )
  })

/**
 * The built-in tools of @rx/tools with `config` (sandbox, limits, protected and hidden paths),
 * confined to each goal's workspace. As with `Builtins.layer`, a chosen tool that cannot run
 * here (`shell` without a usable sandbox in mode `auto`) is not offered.
 */
export const layer = (config: Omit<ToolsConfig.Input, "workspace"> = {}): Layer.Layer<Toolbox> =>
  Layer.succeed(Toolbox, make((workspace) => Builtins.layer({ ...config, workspace })))
