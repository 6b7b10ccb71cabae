/**
 * The goals of an rx serve, through `@rx/server`'s typed `Client`: loaded only by `--server`.
 */
import type { Path } from "@effect/platform"
import { FileSystem } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { type ApiError, Client, Config as ServerConfig } from "@rx/server"
import { Effect, Option, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { resolve as resolvePath } from "node:path"
import { type Followed, type Hooks, observed, type Service } from "./service.js"
import * as Log from "../Log.js"
import * as Settings from "../Settings.js"
import { UsageError } from "../Settings.js"
import * as Setup from "../Setup.js"

/**
 * The bearer token for `url`: `RX_TOKEN`, or, for a server on this machine, the token file next
 * to the log (`--db`, `RX_DB` or the default), which `rx serve` writes when `RX_TOKEN` is unset.
 * A remote server's token never comes from a file here, so the local one cannot leak to it.
 */
const tokenFor = (url: string, given: Settings.Given) =>
  Effect.gen(function*() {
    const env = yield* Settings.token
    if (Option.isSome(env)) return env.value
    const howTo = `set RX_TOKEN to the token of the server at ${url}`
    if (!ServerConfig.isLoopback(new URL(url).hostname)) return yield* new UsageError({ message: `${howTo} (rx serve prints where it keeps it)` })
    const file = yield* Log.tokenFile(yield* Settings.database(Settings.dbFlag(given)))
    const text = yield* Effect.flatMap(FileSystem.FileSystem, (fs) => fs.readFileString(file)).pipe(
      Effect.mapError(() => new UsageError({ message: `${howTo}: there is no token file at ${file} (rx serve writes it there when RX_TOKEN is unset, beside the log it uses)` }))
    )
    return text.trim()
  })

/** An error of the server (or of reaching it) as one line a user can act on. */
const explain = (url: string) => (error: ApiError.ApiError | Client.ClientError): UsageError => {
  switch (error._tag) {
    case "@rx/server/Unauthorized":
      return new UsageError({ message: `the server at ${url} refused the token: set RX_TOKEN to its token (rx serve prints where it keeps it)` })
    case "@rx/server/NotFound":
      return new UsageError({
        message: error.goalId === undefined ? `${error.message} (at ${url})` : `no goal with id ${error.goalId} at ${url} (rx list --server ${url} shows the goals)`
      })
    case "@rx/server/BadRequest":
      return new UsageError({ message: `the server at ${url} refused the request: ${error.message}` })
    case "@rx/server/ClientError":
      return new UsageError({ message: error.message })
    default:
      return new UsageError({ message: `the server at ${url}: ${error.message}` })
  }
}

/** What `rx run --server` may set: the limits, the approval policy, the folder and instructions. */
const remoteRunKeys: ReadonlyArray<Settings.Key> = [...Settings.limitKeys, "ask", "deny", "workspace", "instructions"]

/** The goals of the rx serve at `url`, with the token the settings name. */
export const makeHttp = (url: string, given: Settings.Given) =>
  Effect.gen(function*() {
    const context = yield* Effect.context<FileSystem.FileSystem | Path.Path>()
    const connect = Effect.flatMap(tokenFor(url, given), (token) => Effect.provide(Client.make({ url, token }), NodeHttpClient.layer)).pipe(
      Effect.provide(context),
      Effect.cached
    )
    const rx = yield* connect
    const http = <A, R>(effect: (client: Client.Service) => Effect.Effect<A, ApiError.ApiError | Client.ClientError, R>) =>
      Effect.flatMap(rx, (client) => Effect.mapError(effect(client), explain(url)))
    const listed = (params: Parameters<Client.Service["goals"]>[0]) => http((client) => Stream.runCollect(client.goals(params))).pipe(Effect.map((goals) => Array.from(goals)))
    /** The goal's events from the start, each from `from` on observed, until it ends or suspends. */
    const follow = (goalId: string, from: number, hooks: Hooks) =>
      Effect.flatMap(rx, (client) =>
        observed(goalId, client.events(goalId), from, hooks, "the server ended the events before the goal ended").pipe(Effect.mapError(explain(url))))

    const service: Service = {
      where: { _tag: "Server", url },
      run: (request, hooks) =>
        Effect.gen(function*() {
          yield* Settings.noMcp(request, "rx run --server")
          yield* Settings.refuseOthers(request.given, remoteRunKeys, "rx run --server takes the limits, --ask, --deny, --workspace (a folder inside the server's root) and --instructions")
          const flags = Settings.fromGiven(request.given)
          // The limits and approvals of the environment apply as in a local run; a workspace only from the flag.
          const values = Settings.values(Settings.merge(flags, yield* Settings.fromEnv(remoteRunKeys.filter((key) => key !== "workspace" && key !== "instructions"))))
          const approval = yield* Settings.approval(values.ask ?? [], values.deny ?? [], Setup.builtinNames, Setup.builtinNames)
          const options = { ...Setup.runOptions(values), ...(Object.keys(approval).length === 0 ? {} : { approval }) }
          // A continuation sends the new instruction as its goal, with the goal it continues.
          const continues = Option.getOrUndefined(request.continues ?? Option.none())
          const text = continues === undefined ? yield* Setup.goalText(request.goal, request.goalFile, options) : Option.getOrElse(request.goal, () => "continue")
          const instructions = values.instructions === undefined
            ? ""
            : (yield* Setup.readText(resolvePath(values.instructions), "the --instructions file", Setup.maxInstructionBytes)).trim()
          const { goalId } = yield* http((client) =>
            client.submit({
              goal: text,
              options,
              ...(instructions === "" ? {} : { instructions }),
              ...(continues === undefined ? {} : { continues }),
              ...(flags.workspace === undefined ? {} : { workspace: flags.workspace.value })
            })
          )
          return yield* follow(goalId, 0, hooks)
        }).pipe(Effect.provide(context)),
      resume: (request, hooks) =>
        Effect.gen(function*() {
          yield* Settings.noMcp(request, "rx resume --server")
          yield* Settings.refuseOthers(request.given, [], "the goal goes on with the settings it recorded")
          const before = yield* http((client) => client.goal(request.goalId))
          yield* http((client) => client.resume(request.goalId))
          return yield* follow(request.goalId, before.nextSeq, hooks)
        }),
      list: listed({}),
      view: (goalId) => http((client) => client.view(goalId)),
      summary: (goalId) => http((client) => client.goal(goalId)),
      events: (goalId) => http((client) => Stream.runCollect(client.events(goalId, { follow: false }))).pipe(Effect.map((events) => Array.from(events))),
      // The server finds them in its log (`View.Goal.continuedBy`), in one request.
      continuedBy: (goalId) => http((client) => Effect.map(client.view(goalId), (view) => view.continuedBy)),
      follow: (goalId, wait) =>
        wait
          ? Stream.fail(new UsageError({ message: "--wait does not apply with --server: the server runs the goal, and --follow lasts until it terminates" }))
          : Stream.unwrap(Effect.map(rx, (client) =>
            client.events(goalId, { follow: true }).pipe(
              Stream.map((event): Followed => ({ _tag: "Event", event })),
              Stream.mapError(explain(url))
            ))),
      cancel: (goalId) =>
        Effect.flatMap(rx, (client) =>
          client.cancel(goalId).pipe(
            Effect.as("requested" as const),
            Effect.catchTag("@rx/server/Conflict", () => Effect.succeed("already_terminated" as const)),
            Effect.mapError(explain(url))
          )),
      say: (goalId, text) =>
        Effect.flatMap(rx, (client) =>
          client.say(goalId, { text }, { idempotencyKey: `say-${randomUUID()}` }).pipe(
            Effect.mapError((error) => (error._tag === "@rx/server/Conflict" ? new UsageError({ message: error.message }) : explain(url)(error))),
            Effect.asVoid
          )),
      decide: (d) =>
        Effect.gen(function*() {
          const goal = yield* http((client) => client.goal(d.goalId))
          const callId = Option.getOrElse(d.callId, () => goal.approval?.callId ?? "")
          if (callId === "") {
            return yield* new UsageError({
              message: goal.status === "terminated"
                ? `goal ${d.goalId} has terminated (${goal.reason ?? "?"}); there is nothing to decide`
                : `goal ${d.goalId} waits for no decision (rx inspect ${d.goalId} --server ${url} shows its approvals)`
            })
          }
          // The server records who decided as `<by> (via http)`.
          yield* http((client) => client.decide(d.goalId, callId, { approve: d.approve, by: d.by, ...(d.approve ? {} : { reason: d.reason }) }))
          const asked = goal.approval !== null && goal.approval.callId === callId ? goal.approval : null
          return { callId, call: asked === null ? null : { tool: asked.tool, input: asked.input, iteration: 0 } }
        })
    }
    return service
  })

