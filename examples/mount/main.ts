import { Command, Options } from "@effect/cli"
import { Cli } from "@rx/cli"
import { Console } from "effect"

// An app of its own, with rx's commands mounted under `myapp rx`.
const hello = Command.make("hello", { name: Options.text("name") }, ({ name }) => Console.log(`hello ${name}`))
const myapp = Command.make("myapp").pipe(Command.withSubcommands([hello, Cli.command]))

// `myapp rx ...` helps, refuses and exits as `rx ...` does (the exit codes of `rx --help`).
Cli.runMain(Command.run(myapp, { name: "myapp", version: "1.0.0" })(process.argv), { name: "myapp" })
