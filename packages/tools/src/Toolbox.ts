/**
 * The tools of each goal, cached per workspace. Goals submitted to a server or a cluster each
 * have their own workspace (a folder inside the root), so `rx serve` and the cluster's workers ask
 * the `Toolbox` for a `ToolRegistry` per workspace: when a goal is submitted (its tool specs are
 * recorded) and each time it runs.
 * A registry is built once per workspace and shared by the goals working there (the built-in
 * tools serve concurrent calls); it is dropped some time after it was built, or when more
 * workspaces are in use than the toolbox keeps.
 *
 * A server asks for the toolbox `serving` where it listens: the registries it gets are built
 * knowing that, and the built-in `http_fetch` refuses those endpoints (a goal never becomes a
 * client of the server that runs it, whatever the allow-list says).
 */
import { ToolRegistry } from "@rx/kernel"
import * as Builtins from "./Builtins.js"
import type * as ToolsConfig from "./Config.js"
import type * as Sandbox from "./Sandbox.js"
import { Context, Duration, Effect, Exit, Layer, Option, Schema, type Scope, ScopedCache } from "effect"

/** The tools for a workspace could not be set up (an invalid config, a sandbox that is required but unusable). */
export class ToolboxError extends Schema.TaggedError<ToolboxError>()("@rx/tools/ToolboxError", {
  workspace: Schema.String,
  message: Schema.String
}) {}

export interface Service {
  /** The registry of goals working in `workspace` (an absolute path inside the root), valid while the scope lasts. */
  readonly registry: (workspace: string) => Effect.Effect<ToolRegistry.Service, ToolboxError, Scope.Scope>
  /** The approval policy a goal working in `workspace` starts with; what a submission asks for comes on top. */
  readonly approval: (workspace: string) => Effect.Effect<Readonly<Record<string, "ask" | "deny">>, ToolboxError, Scope.Scope>
  /** Both `registry` and `approval` of `workspace`, in one look-up. */
  readonly tools: (workspace: string) => Effect.Effect<Tools, ToolboxError, Scope.Scope>
  /**
   * The same toolbox for a server listening at `endpoints` (`host:port`): its registries are built
   * with `Serving` saying so, and their own cache, kept while the scope lasts.
   */
  readonly serving: (endpoints: ReadonlyArray<string>) => Effect.Effect<Service, never, Scope.Scope>
  /** The protected and hidden entries the registries hold: a sub-goal's folder that holds one of their guards is refused (`Delegate.Config.protection`). */
  readonly protection?: Sandbox.Entries | undefined
}

/** Where the server using the toolbox listens (`host:port` each): tools must never reach them. */
export interface Serving {
  readonly endpoints: ReadonlyArray<string>
}

/** Not used by a server (yet): nothing to refuse. */
const notServing: Serving = { endpoints: [] }

/**
 * The tools config for `workspace`, with the server's own endpoints added to `httpDeny`: what a
 * registry Layer built on @rx/tools' built-ins passes to them.
 */
export const toolsConfig = (config: Omit<ToolsConfig.Input, "workspace">, workspace: string, serving: Serving): ToolsConfig.Input => ({
  ...config,
  workspace,
  httpDeny: [...(config.httpDeny ?? []), ...serving.endpoints]
})

/** A workspace's tools and the approval policy they start with. */
export interface Tools {
  readonly registry: ToolRegistry.Service
  readonly approval: Readonly<Record<string, "ask" | "deny">>
}

export class Toolbox extends Context.Tag("@rx/tools/Toolbox")<Toolbox, Service>() {}

/**
 * What a registry Layer may also provide: the approval policy its tools start with (an MCP
 * server's destructive tools ask a person). Without it, every tool runs without asking.
 */
export class DefaultApproval extends Context.Tag("@rx/tools/DefaultApproval")<DefaultApproval, Readonly<Record<string, "ask" | "deny">>>() {}

/** How many workspaces' registries are kept, and for how long after each was built. */
export interface Options {
  readonly capacity?: number
  readonly timeToLive?: Duration.DurationInput
  /** The protected and hidden entries the registries hold (`Service.protection`). */
  readonly protection?: Sandbox.Entries
}

/**
 * A toolbox from any registry Layer built per workspace (your own tools, test tools); it may
 * also provide `DefaultApproval`. `build` is told where the server using the toolbox listens
 * (`Serving`): a registry with a tool that makes network requests should refuse those endpoints
 * (`toolsConfig` does it for the built-ins). A registry that failed to build is not kept: the
 * next goal tries again.
 */
export const make = <E extends { readonly message: string }>(
  build: (workspace: string, serving: Serving) => Layer.Layer<ToolRegistry.ToolRegistry, E>,
  options: Options = {}
): Effect.Effect<Service, never, Scope.Scope> => makeServing(build, options, notServing)

const makeServing = <E extends { readonly message: string }>(
  build: (workspace: string, serving: Serving) => Layer.Layer<ToolRegistry.ToolRegistry, E>,
  options: Options,
  serving: Serving
): Effect.Effect<Service, never, Scope.Scope> =>
  Effect.map(
    ScopedCache.makeWith({
      capacity: options.capacity ?? 64,
      timeToLive: Exit.match({ onFailure: () => Duration.zero, onSuccess: () => options.timeToLive ?? "10 minutes" }),
      lookup: (workspace: string) =>
        Layer.build(build(workspace, serving)).pipe(
          Effect.map((context): Tools => ({
            registry: Context.get(context, ToolRegistry.ToolRegistry),
            approval: Option.getOrElse(Context.getOption(context, DefaultApproval), () => ({}))
          })),
          Effect.mapError((error) => new ToolboxError({ workspace, message: error.message }))
        )
    }),
    (cache) =>
      Toolbox.of({
        registry: (workspace) => Effect.map(cache.get(workspace), (tools) => tools.registry),
        approval: (workspace) => Effect.map(cache.get(workspace), (tools) => tools.approval),
        tools: (workspace) => cache.get(workspace),
        serving: (endpoints) => makeServing(build, options, { endpoints: [...serving.endpoints, ...endpoints] }),
        protection: options.protection
      })
  )

/** `make` as a Layer. */
export const layerWith = <E extends { readonly message: string }>(
  build: (workspace: string, serving: Serving) => Layer.Layer<ToolRegistry.ToolRegistry, E>,
  options: Options = {}
): Layer.Layer<Toolbox> => Layer.scoped(Toolbox, make(build, options))

/**
 * The built-in tools of @rx/tools with `config` (sandbox, limits, protected and hidden paths,
 * the tools chosen), confined to each goal's workspace, their `http_fetch` refusing the server's
 * own endpoints. As with `Builtins.layer`, a chosen tool that cannot run here (`shell` without a
 * usable sandbox in mode `auto`) is not offered.
 */
export const layer = (config: Omit<ToolsConfig.Input, "workspace"> = {}, options: Options = {}): Layer.Layer<Toolbox> =>
  layerWith((workspace, serving) => Builtins.layer(toolsConfig(config, workspace, serving)), {
    protection: { protectedPaths: config.protectedPaths ?? [".git"], hiddenPaths: config.hiddenPaths ?? [] },
    ...options
  })
