/**
 * Each test file's own database: created with a random name on the test server, dropped (its
 * connections ended) when the file's layer closes.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Reactivity from "@effect/experimental/Reactivity"
import { Context, Effect, Layer, Redacted, type Scope } from "effect"
import * as Net from "node:net"

/** The server's maintenance database, as the test role (`RX_PG_URL` overrides it). */
export const adminUrl = process.env["RX_PG_URL"] ?? "postgres://rx:rx@127.0.0.1:5432/postgres"

/** The URL of the same server with another database. */
export const urlOf = (database: string): string => {
  const url = new URL(adminUrl)
  url.pathname = `/${database}`
  return url.toString()
}

const admin = PgClient.make({ url: Redacted.make(adminUrl), maxConnections: 1 }).pipe(Effect.provide(Reactivity.layer))

/** A database of this test file: its name and URL. */
export class TestDatabase extends Context.Tag("@rx/store-pg/test/TestDatabase")<TestDatabase, {
  readonly name: string
  readonly url: string
}>() {}

/** Create a fresh database; drop it, ending its sessions, when the scope closes. */
export const fresh = Effect.gen(function*() {
  const name = `rx_test_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 10)}`
  yield* Effect.acquireRelease(
    Effect.scoped(Effect.flatMap(admin, (sql) => sql.unsafe(`CREATE DATABASE ${name}`))),
    () => Effect.orDie(Effect.scoped(Effect.flatMap(admin, (sql) => sql.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))))
  )
  return { name, url: urlOf(name) }
})

export const layer: Layer.Layer<TestDatabase> = Layer.scoped(TestDatabase, Effect.orDie(fresh))

/**
 * A "Postgres" on 127.0.0.1 that takes connections and never answers: whoever connects waits
 * until its own timeout. Its URL, and how many connections it has taken; closed with the scope.
 */
export const silent: Effect.Effect<{ readonly url: string; readonly taken: () => number }, never, Scope.Scope> = Effect.gen(function*() {
  const sockets: Array<Net.Socket> = []
  const server = yield* Effect.acquireRelease(
    Effect.async<Net.Server>((resume) => {
      const server = Net.createServer((socket) => void sockets.push(socket))
      server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
    }),
    (server) => Effect.sync(() => (sockets.forEach((socket) => socket.destroy()), server.close()))
  )
  return { url: `postgres://rx:rx@127.0.0.1:${(server.address() as Net.AddressInfo).port}/rx`, taken: () => sockets.length }
})
