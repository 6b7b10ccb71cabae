/**
 * The `delegate` tool: a goal hands a piece of work to a sub-goal with its own context, and gets
 * back how it ended. The sub-goal is a goal of the same log, run to its end by the call with the
 * parent's model and store, with a subset of the parent's tools, in the parent's workspace or a
 * folder inside it.
 *
 * - **Ids.** The sub-goal's id is derived from the call's (`childId`): running the call again (a
 *   resume after a crash, another worker) finds the sub-goal instead of making a second one. Its
 *   `GoalSubmitted` names its parent, the call and its depth (`Event.Parent`); the call's output
 *   names the sub-goal. The tool is idempotent by construction: a call run again drives the same
 *   sub-goal on from its log (its completed iterations are never redone), and a sub-goal that has
 *   ended gives its recorded end again, running nothing.
 * - **Waiting.** A sub-goal that waits (for a person's approval, or its model) makes the call wait
 *   (`Tool.Outcome` `Waiting`): the parent is suspended with the call started and says which
 *   sub-goal it waits on; resuming the parent runs the call again, which resumes the sub-goal.
 * - **Cancel.** Cancelling the parent cancels its open sub-goals (`Control.cancel`); a call cut
 *   short by the cancel records the sub-goal's cancelled end (`recover`).
 * - **Limits.** Depth (`maxDepth`, default 2, counted from the goal with no parent), sub-goals per
 *   goal (`maxChildren`, default 8), and the token budget: a sub-goal gets at most what the parent
 *   has left, and what it spends (its own and its sub-goals' tokens) is counted in the parent's
 *   (`ToolSucceeded.usage`). A call past a limit fails, recorded with the limit, and runs nothing.
 */
import { Behaviour, Control, Event, Goal, LanguageModel, Options, Runner, type State, StateStore, Tool, ToolRegistry } from "@rx/kernel"
import { Context, Data, Effect, Either, Layer, Option, Schedule, Schema, type Scope } from "effect"
import { realpathSync, statSync } from "node:fs"
import * as NodePath from "node:path"
import * as Confinement from "./Confinement.js"
import * as Sandbox from "./Sandbox.js"

/** The tool's name. */
export const name = "delegate"

/** Sub-goals deep a tree may grow when the root goal does not say (`Options.maxDepth`). */
export const defaultMaxDepth = 2
/** Sub-goals one goal may delegate when it does not say (`Options.maxChildren`). */
export const defaultMaxChildren = 8
/**
 * Goals a tree may hold, its root included, when it does not say (`Options.maxTreeGoals`): above
 * the 73 that the default depth and sub-goals per goal allow (1 + 8 + 64), so it binds only when
 * those are raised, where a tree would otherwise grow by a factor at each level.
 */
export const defaultMaxTreeGoals = 100
/**
 * Iterations the goals of a tree may take together when it does not say
 * (`Options.maxTreeIterations`): twenty goals' default iterations, a bound on the model requests
 * (and so the cost) of one tree whatever its shape.
 */
export const defaultMaxTreeIterations = 1_000

const Count = Schema.Int.pipe(Schema.positive())

export const Input = Schema.Struct({
  goal: Schema.String.annotations({ description: "What the sub-agent is to achieve. It sees none of this conversation: say everything it needs." }),
  instructions: Schema.optional(Schema.String.annotations({ description: "How to go about it (conventions, constraints), shown with the goal." })),
  tools: Schema.optional(Schema.Array(Schema.String).annotations({ description: "The tools it may use, a subset of yours (default: all of yours)." })),
  folder: Schema.optional(Schema.String.annotations({ description: "A folder inside your workspace to confine it to (default: your workspace)." })),
  max_iterations: Schema.optional(Count.annotations({ description: "Its iteration limit, at most yours." })),
  max_total_tokens: Schema.optional(Count.annotations({ description: "Its token budget, at most what you have left." }))
})
export type Input = typeof Input.Type

/** The call's output: which sub-goal, how it ended, and what it spent. */
export const Output = Schema.Struct({
  child: Schema.String,
  reason: Event.Reason,
  /** Its `done` summary, or why it ended otherwise. */
  summary: Schema.String,
  iterations: Schema.NonNegativeInt,
  /** Tokens it spent, its sub-goals' included. */
  tokens: Schema.NonNegativeInt
})
export type Output = typeof Output.Type

const description = [
  "Hand a self-contained piece of work to a sub-agent with its own context, and get back how it ended and its summary.",
  "It runs to its end before you go on; give it the goal in full, as it sees nothing of this conversation."
].join(" ")

/**
 * The id of the sub-goal that call `callId` of goal `goalId` delegates: `<goalId>.<iteration>`, or
 * `<goalId>.<iteration>-<index>` for a later call of the same answer. Derived, never random, so a
 * call run again finds its sub-goal; no two calls of any goals share one (the part after the last
 * `.` holds no `.`).
 */
export const childId = (goalId: string, callId: string): string => {
  const rest = callId.startsWith(`${goalId}:`) ? callId.slice(goalId.length + 1) : callId
  return `${goalId}.${rest.replaceAll(":", "-")}`
}

/** What the tool needs from its transport besides the model, the store and the parent's tools. */
export interface Config {
  /** The folder the parent's tools act in: a sub-goal in another folder gets tools made by `workspaceTools`. */
  readonly workspace?: string | undefined
  /**
   * The protected and hidden entries of the tools at `workspace` (default: `.git` protected). A
   * folder that is, lies inside or holds one of their guards is refused to a sub-goal.
   */
  readonly protection?: Sandbox.Entries | undefined
  /**
   * The tools of a sub-goal confined to `workspace` (a folder inside the parent's), for the
   * scope; without it, a sub-goal runs only in the parent's folder. `protection` is what they
   * must hold: the ancestors' guards as absolute paths (`Sandbox.inherited`), plus the entries of
   * `Config.protection`, which hold in the sub-goal's own folder.
   */
  readonly workspaceTools?: ((workspace: string, protection: Sandbox.Entries) => Effect.Effect<ToolRegistry.Service, string, Scope.Scope>) | undefined
  /** Each event a sub-goal commits (a transport's live output). */
  readonly observe?: Runner.Observer | undefined
  /** A person's decision on a sub-goal's call that needs one; without it, the sub-goal (and its parent) waits. */
  readonly approve?: Runner.Approver | undefined
}

/** The call ends here with `outcome`, before or instead of running a sub-goal. */
class Stop extends Data.TaggedError("Stop")<{ readonly outcome: Tool.Outcome }> {}

/** A refusal the model can act on, recorded as the call's failure. */
const refuse = (message: string) => new Stop({ outcome: Tool.failure("recoverable", `delegate refused: ${message}`) })

const encodeOutput = Schema.encodeSync(Output)

/**
 * `base` with `delegate` beside its tools, running sub-goals with the model and store at hand. The
 * sub-goals it makes are given subsets of those tools (and `delegate` again, where they were given it).
 */
export const extend = (
  base: ToolRegistry.Service,
  config: Config = {}
): Effect.Effect<ToolRegistry.Service, ToolRegistry.InvalidToolset, StateStore.StateStore | LanguageModel.LanguageModel> =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    const model = yield* LanguageModel.LanguageModel
    if (base.specs.some((spec) => spec.name === name)) {
      return yield* new ToolRegistry.InvalidToolset({ message: `"${name}" is already a tool of this registry` })
    }
    const services = Context.make(StateStore.StateStore, store).pipe(Context.add(LanguageModel.LanguageModel, model))
    const tool = make(config, base, services)
    const own = yield* ToolRegistry.make([tool])
    return combine(base, own)
  })

/** A `ToolRegistry` with the one in context and `delegate` beside it (`extend`). */
export const layer = (config: Config = {}): Layer.Layer<
  ToolRegistry.ToolRegistry,
  ToolRegistry.InvalidToolset,
  ToolRegistry.ToolRegistry | StateStore.StateStore | LanguageModel.LanguageModel
> => Layer.effect(ToolRegistry.ToolRegistry, Effect.flatMap(ToolRegistry.ToolRegistry, (base) => extend(base, config)))

/**
 * Drive a goal (`state`, restored from its log) until it ends or waits: `Runner.resume` with
 * `tools`, and `delegate` beside them (`extend`, with `config`) when the goal was offered it. Local
 * runs, `rx serve` and a cluster's workers all drive goals with it; `config`'s hooks are the run's.
 */
export const drive = (
  state: State.State,
  tools: ToolRegistry.Service,
  config: Config = {}
): Effect.Effect<Goal.Result, Runner.RunError | Goal.GoalNotFound | ToolRegistry.InvalidToolset, StateStore.StateStore | LanguageModel.LanguageModel> =>
  Effect.flatMap(offered(state.tools) ? extend(tools, config) : Effect.succeed(tools), (registry) =>
    Runner.resume(state.goalId, { observe: config.observe, approve: config.approve }).pipe(Effect.provideService(ToolRegistry.ToolRegistry, registry)))

/** The tool's spec, as a goal offered it records it. */
export const spec: Tool.Spec = Tool.make({ name, description, input: Input, output: Output, idempotent: true, execute: () => Effect.die("unused") }).spec

/** Whether a goal was offered `delegate` (its recorded tools name it): its runs need `extend`. */
export const offered = (tools: ReadonlyArray<Tool.Spec>): boolean => tools.some((t) => t.name === name)

/**
 * `base` with `delegate`'s spec beside its tools, for recording a goal that is offered it where no
 * sub-goal runs (a server handing goals to a cluster's workers, which run them with `extend`): a
 * call of it here is refused.
 */
export const offer = (base: ToolRegistry.Service): ToolRegistry.Service => ({
  specs: [...base.specs.filter((s) => s.name !== name), spec],
  prepare: (call) => (call.tool === name ? Either.left(`${name} does not run here: the goal runs where its sub-goals can`) : base.prepare(call))
})

/** Two registries as one: the specs of both, each call prepared by the one that has its tool. */
const combine = (first: ToolRegistry.Service, second: ToolRegistry.Service): ToolRegistry.Service => ({
  specs: [...first.specs, ...second.specs],
  prepare: (call) => (second.specs.some((spec) => spec.name === call.tool) ? second.prepare(call) : first.prepare(call))
})

/** Only the tools of `registry` named in `names`. */
const only = (registry: ToolRegistry.Service, names: ReadonlyArray<string>): ToolRegistry.Service => ({
  specs: registry.specs.filter((spec) => names.includes(spec.name)),
  prepare: (call) =>
    names.includes(call.tool) ? registry.prepare(call) : Either.left(`there is no tool named "${call.tool}"; available: ${[...names, ToolRegistry.doneName].join(", ")}`)
})

type Services = StateStore.StateStore | LanguageModel.LanguageModel

const make = (config: Config, base: ToolRegistry.Service, services: Context.Context<Services>): Tool.Tool => {
  const decoding = Tool.make({ name, description, input: Input, output: Output, idempotent: true, execute: () => Effect.die("unused") })

  const protection = config.protection ?? defaultProtection

  /**
   * What the tools of a sub-goal in `workspace` (a real folder inside the root's) hold: the root's
   * guards as absolute paths plus its own entries; checked again here, as the folder may have
   * been replaced (by a link into a guarded folder) since the sub-goal was submitted.
   */
  const guarded = (workspace: string): Effect.Effect<Sandbox.Entries, string> =>
    Effect.suspend(() => {
      const root = config.workspace
      if (root === undefined) return Effect.succeed(protection)
      const real = Sandbox.realPathOf(workspace)
      const why = real === workspace ? Sandbox.refusedFolder(root, real, protection) : `it is now a link to ${real}`
      return why === undefined
        ? Effect.succeed(Sandbox.inherited(root, protection))
        : Effect.fail(`its folder ${workspace} cannot hold a sub-goal: ${why}`)
    })

  /** The registry a goal with these tools, in this folder, runs with. */
  const registryFor = (names: ReadonlyArray<string>, workspace: string | undefined): Effect.Effect<ToolRegistry.Service, string, Scope.Scope> => {
    const own = names.includes(name) ? Effect.orDie(ToolRegistry.make([tool])) : Effect.succeed(undefined)
    const tools = workspace === undefined || workspace === config.workspace || config.workspaceTools === undefined
      ? Effect.succeed(base)
      : Effect.flatMap(guarded(workspace), (protection) => config.workspaceTools === undefined ? Effect.succeed(base) : config.workspaceTools(workspace, protection))
    return Effect.zipWith(tools, own, (tools, delegating) => {
      const chosen = only(tools, names.filter((n) => n !== name))
      return delegating === undefined ? chosen : combine(chosen, delegating)
    })
  }

  /** Run a sub-goal from its log until it ends or waits: with its own tools, the parent's model and store. */
  const drive = (id: string, state: State.State) =>
    Effect.scoped(Effect.gen(function*() {
      const registry = yield* registryFor(state.tools.map((t) => t.name), state.options.settings?.workspace).pipe(
        Effect.mapError((why) => new Stop({ outcome: Tool.failure("recoverable", `sub-goal ${id} cannot run: its tools cannot be set up (${why})`) }))
      )
      return yield* Runner.resume(id, { observe: config.observe, approve: config.approve }).pipe(
        Effect.provideService(ToolRegistry.ToolRegistry, registry),
        // Another runner holds it (a person resumed it on its own): wait for it to let go.
        Effect.retry({ while: (error) => error._tag === "@rx/kernel/GoalBusy", schedule: Schedule.spaced("500 millis") })
      )
    }))

  /** What the call gives once the sub-goal has run: its end, or the wait it is in. */
  const outcomeOf = (id: string, result: Goal.Result, rules: Behaviour.Rules): Tool.Outcome => {
    if (result.status === "suspended") {
      // Waiting on its own sub-goal: name that one only, so the text does not hold every level below.
      const below = rules.treeLimits ? result.state.suspended?.child : undefined
      const detail = below === undefined ? `sub-goal ${id} waits: ${result.detail}` : `sub-goal ${id} waits on its sub-goal ${below} (${result.reason.replaceAll("_", " ")})`
      return { _tag: "Waiting", reason: result.reason, detail, child: id }
    }
    const { usage } = result.state
    const output: Output = {
      child: id,
      reason: result.reason,
      summary: result.detail,
      iterations: result.iterations,
      tokens: usage.inputTokens + usage.outputTokens
    }
    return { _tag: "Success", output: encodeOutput(output), usage }
  }

  /** The rules of the behaviour version goal `goalId` runs under. */
  const rulesOf = (goalId: string) => Effect.map(Goal.restore(goalId), (state) => Behaviour.rules(state.behaviour))

  /** The sub-goal `id`, if it exists and is this call's; an error if a goal not made by it holds the id. */
  const existing = (id: string, parentId: string, callId: string) =>
    Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      if (Option.isNone(yield* store.goal(id))) return Option.none<State.State>()
      const state = yield* Goal.restore(id)
      const submitted = yield* StateStore.first(store, id, 0, ["GoalSubmitted"])
      const link = submitted._tag === "GoalSubmitted" ? submitted.parent : undefined
      if (link?.goalId !== parentId || link.callId !== callId) {
        return yield* new Stop({ outcome: Tool.failure("fatal", `goal ${id} exists and was not delegated by call ${callId}: its id is taken, so this call cannot make its sub-goal`) })
      }
      return Option.some(state)
    })

  /** Check the call against the parent's limits, and record the sub-goal; a refusal is the call's outcome. */
  const submit = (input: Input, id: string, parentId: string, callId: string) =>
    Effect.gen(function*() {
      const store = yield* StateStore.StateStore
      const parent = yield* Goal.restore(parentId)
      const submitted = yield* StateStore.first(store, parentId, 0, ["GoalSubmitted"])
      const depth = (submitted._tag === "GoalSubmitted" ? submitted.parent?.depth ?? 0 : 0) + 1
      const o = parent.options
      const maxDepth = o.maxDepth ?? defaultMaxDepth
      if (depth > maxDepth) {
        return yield* (refuse(`goal ${parentId} is at depth ${depth - 1} of its tree, and its sub-goals may be at most ${maxDepth} deep (maxDepth ${maxDepth}): do this work yourself`))
      }
      const maxChildren = o.maxChildren ?? defaultMaxChildren
      const children = yield* store.goals({ parent: parentId })
      if (children.length >= maxChildren) {
        return yield* (refuse(`goal ${parentId} has delegated ${children.length} sub-goals, its limit (maxChildren ${maxChildren}): do this work yourself`))
      }
      const tree = Behaviour.rules(parent.behaviour).treeLimits ? yield* treeOf(parentId) : undefined
      const maxTreeGoals = o.maxTreeGoals ?? defaultMaxTreeGoals
      if (tree !== undefined && tree.goals >= maxTreeGoals) {
        return yield* (refuse(
          `the tree of goal ${tree.root} holds ${tree.goals} goals, its limit (maxTreeGoals ${maxTreeGoals}; rx run --max-tree-goals N raises it for a new goal): do this work yourself`
        ))
      }
      const maxTreeIterations = o.maxTreeIterations ?? defaultMaxTreeIterations
      const treeLeft = tree === undefined ? undefined : maxTreeIterations - tree.iterations
      if (tree !== undefined && treeLeft !== undefined && treeLeft <= 0) {
        return yield* (refuse(
          `the goals of the tree of goal ${tree.root} have taken ${tree.iterations} iterations, its limit (maxTreeIterations ${maxTreeIterations}; rx run --max-tree-iterations N raises it for a new goal): do this work yourself`
        ))
      }
      const spent = parent.usage.inputTokens + parent.usage.outputTokens
      const left = o.maxTotalTokens === undefined ? undefined : o.maxTotalTokens - spent
      if (left !== undefined && left <= 0) {
        return yield* (refuse(`goal ${parentId} has used ${spent} of its ${o.maxTotalTokens} tokens (maxTotalTokens): none are left for a sub-goal`))
      }
      const offered = parent.tools.map((t) => t.name)
      const names = input.tools ?? offered
      const unknown = names.filter((n) => !offered.includes(n))
      if (unknown.length > 0) {
        return yield* (refuse(`${unknown.map((n) => JSON.stringify(n)).join(", ")} ${unknown.length === 1 ? "is not one of your tools" : "are not your tools"}; yours: ${offered.join(", ")}`))
      }
      const workspace = input.folder === undefined ? o.settings?.workspace : yield* folderOf(o.settings?.workspace, input.folder, [config.workspace, o.settings?.workspace], protection)
      const budget = left === undefined ? input.max_total_tokens : Math.min(input.max_total_tokens ?? left, left)
      const settings = o.settings === undefined && workspace === undefined
        ? {}
        : { settings: { ...o.settings, ...(workspace === undefined ? {} : { workspace }), tools: names } }
      const options: Options.Input = {
        maxIterations: Math.min(input.max_iterations ?? o.maxIterations, o.maxIterations, treeLeft ?? o.maxIterations),
        maxConsecutiveFailures: o.maxConsecutiveFailures,
        maxMalformed: o.maxMalformed,
        maxRepeats: o.maxRepeats,
        noProgressWindow: o.noProgressWindow,
        promptBudget: o.promptBudget,
        maxAnswerChars: o.maxAnswerChars,
        maxCallsPerAnswer: o.maxCallsPerAnswer,
        ...(budget === undefined ? {} : { maxTotalTokens: budget }),
        ...(o.maxDepth === undefined ? {} : { maxDepth: o.maxDepth }),
        ...(o.maxChildren === undefined ? {} : { maxChildren: o.maxChildren }),
        ...(o.maxTreeGoals === undefined ? {} : { maxTreeGoals: o.maxTreeGoals }),
        ...(o.maxTreeIterations === undefined ? {} : { maxTreeIterations: o.maxTreeIterations }),
        // The parent's approval policy holds for its sub-goals: a call it asks about, they ask about.
        approval: o.approval,
        ...settings
      }
      const instructions = [parent.instructions, input.instructions ?? ""].map((text) => text.trim()).filter((text) => text !== "").join("\n\n")
      yield* Effect.scoped(Effect.flatMap(registryFor(names, workspace).pipe(Effect.mapError(refuse)), (registry) => {
        // In another folder the tools are made for it: a tool that is not (an MCP server's acts where its server runs) is not offered there.
        const absent = (input.tools ?? []).filter((n) => n !== name && !registry.specs.some((spec) => spec.name === n))
        if (absent.length > 0) {
          return Effect.fail(refuse(`${absent.join(", ")} cannot be confined to the folder ${input.folder ?? ""} (a sub-goal there has the tools made for that folder: ${registry.specs.map((spec) => spec.name).join(", ")}); leave ${absent.length === 1 ? "it" : "them"} out, or give no folder`))
        }
        return Runner.submit({ goal: input.goal, instructions, options, goalId: id, parent: { goalId: parentId, callId, depth }, ...(config.observe === undefined ? {} : { observe: config.observe }) }).pipe(
          Effect.provideService(ToolRegistry.ToolRegistry, registry),
          Effect.catchTags({
            // Submitted meanwhile by another runner of this call: it is read below.
            "@rx/kernel/GoalBusy": () => Effect.succeed(id),
            "@rx/kernel/InvalidGoal": (error) => Effect.fail(refuse(error.message)),
            "@rx/kernel/InvalidOptions": (error) => Effect.fail(refuse(error.message))
          })
        )
      }))
      return yield* Goal.restore(id)
    })

  /** The sub-goal drives on with the parent's current model settings (a resume of the parent may have changed them), recorded. */
  const follow = (id: string, parentId: string) =>
    Effect.gen(function*() {
      const parent = (yield* Goal.restore(parentId)).options.settings
      if (parent === undefined) return
      const { tools: _tools, workspace: _workspace, ...shared } = parent
      yield* Control.changeOptions(id, (current): Options.Input => ({ ...current, settings: { ...current.settings, ...shared } })).pipe(
        Effect.catchTag("@rx/kernel/InvalidOptions", () => Effect.void)
      )
    })

  const execute = (input: Input, context: Tool.Context): Effect.Effect<Tool.Outcome> => {
    const parentId = context.goalId
    if (parentId === undefined) return Effect.succeed(Tool.failure("fatal", `${name} runs only inside a goal's runner, which says which goal calls it`))
    const id = childId(parentId, context.callId)
    return Effect.gen(function*() {
      const found = yield* existing(id, parentId, context.callId)
      if (Option.isSome(found)) yield* follow(id, parentId)
      const state = Option.isSome(found) ? found.value : yield* submit(input, id, parentId, context.callId)
      return outcomeOf(id, yield* drive(id, state), yield* rulesOf(parentId))
    }).pipe(
      Effect.catchAll((error) => Effect.succeed(error._tag === "Stop" ? error.outcome : failed(id, error))),
      Effect.provide(services)
    )
  }

  /**
   * The call was cut short and its goal cancelled (behaviour 4 asks so): the sub-goal, cancelled
   * with its parent, is driven to its end, which is the call's outcome.
   */
  const recover = (context: Tool.Context): Effect.Effect<Option.Option<Tool.Outcome>> => {
    const parentId = context.goalId
    if (parentId === undefined) return Effect.succeedNone
    const id = childId(parentId, context.callId)
    return Effect.gen(function*() {
      const found = yield* existing(id, parentId, context.callId)
      if (Option.isNone(found)) return Option.some(Tool.failure("recoverable", `the goal was cancelled before sub-goal ${id} was submitted; nothing ran`))
      if ((yield* Goal.restore(parentId)).cancelRequested !== null && found.value.terminated === null) {
        yield* Control.cancel(id, `its parent goal ${parentId} was cancelled`)
      }
      const outcome = outcomeOf(id, yield* drive(id, found.value), yield* rulesOf(parentId))
      return outcome._tag === "Waiting" ? Option.none() : Option.some(outcome)
    }).pipe(
      Effect.catchAll((error) => Effect.succeed(Option.some(error._tag === "Stop" ? error.outcome : failed(id, error)))),
      Effect.provide(services)
    )
  }

  const tool: Tool.Tool = {
    spec: decoding.spec,
    decode: decoding.decode,
    run: (input, context) => execute(input as Input, context),
    recover: (_input, context) => recover(context)
  }
  return tool
}

/**
 * The tree goal `goalId` is in: its root (the goal with no parent above it), how many goals it
 * holds and the iterations they have taken or begun (an open goal's next one counts: a chain of
 * goals each delegating in its first iteration has completed none), from the store's summaries.
 */
const treeOf = (goalId: string) =>
  Effect.gen(function*() {
    const store = yield* StateStore.StateStore
    let root = goalId
    for (const seen = new Set<string>(); !seen.has(root);) {
      seen.add(root)
      const parent = Option.flatMap(yield* store.goal(root), (summary) => Option.fromNullable(summary.parent))
      if (Option.isNone(parent)) break
      root = parent.value
    }
    const taken = (summary: { readonly iterations: number; readonly status: string }) => summary.iterations + (summary.status === "open" ? 1 : 0)
    let goals = 1
    let iterations = Option.match(yield* store.goal(root), { onNone: () => 0, onSome: taken })
    const queue = [root]
    for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
      for (const child of yield* store.goals({ parent: next })) {
        goals++
        iterations += taken(child)
        queue.push(child.goalId)
      }
    }
    return { root, goals, iterations }
  })

/** The sub-goal could not be run: the log failed, or it holds what this rx cannot run; the parent stops, so no second sub-goal is made. */
const failed = (id: string, error: { readonly message: string }): Tool.Outcome =>
  Tool.failure("fatal", `sub-goal ${id} could not be run: ${error.message}`)

/** `.git` protected, nothing hidden (`Workspace.defaultProtection`): what a transport that says nothing holds. */
const defaultProtection: Sandbox.Entries = { protectedPaths: [".git"], hiddenPaths: [] }

/**
 * `folder` inside `workspace`, as an absolute real path: relative, no `..`, an existing folder,
 * not leaving it through a link, and not one that is, lies inside or holds a guard of any of
 * `ancestors` (the root's folder and the parent's) by `protection` (`Sandbox.refusedFolder`).
 */
const folderOf = (
  workspace: string | undefined,
  folder: string,
  ancestors: ReadonlyArray<string | undefined>,
  protection: Sandbox.Entries
): Effect.Effect<string, Stop> =>
  Effect.suspend(() => {
    if (workspace === undefined) return Effect.fail(refuse(`"folder" needs a goal with a workspace; this one has none`))
    const normal = NodePath.normalize(folder)
    if (NodePath.isAbsolute(folder) || normal === ".." || normal.startsWith(`..${NodePath.sep}`)) {
      return Effect.fail(refuse(`folder "${folder}" must be a relative path inside your workspace`))
    }
    const real = Either.try({
      try: () => {
        const root = realpathSync(workspace)
        return { root, path: realpathSync(NodePath.join(root, normal)) }
      },
      catch: (error) => `${error instanceof Error && "code" in error && error.code === "ENOENT" ? "does not exist (create it first)" : error instanceof Error ? error.message : String(error)}`
    })
    if (Either.isLeft(real)) return Effect.fail(refuse(`folder "${folder}": ${real.left}`))
    if (!Confinement.inside(real.right.root, real.right.path)) return Effect.fail(refuse(`folder "${folder}": it leads outside your workspace`))
    const folderish = Either.try(() => statSync(real.right.path).isDirectory())
    if (!Either.getOrElse(folderish, () => false)) return Effect.fail(refuse(`folder "${folder}": it is not a folder`))
    for (const ancestor of new Set(ancestors)) {
      if (ancestor === undefined) continue
      const why = Sandbox.refusedFolder(ancestor, real.right.path, protection)
      if (why !== undefined) return Effect.fail(refuse(`folder "${folder}": ${why}; give a folder that holds none of these`))
    }
    return Effect.succeed(real.right.path)
  })
