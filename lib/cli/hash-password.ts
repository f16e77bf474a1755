import { CodedError } from '../coded-error.js'
import { hashPassword } from '../credentials/hash.js'
import { parseFlags, type CommandSpec } from './flags.js'
import { EXIT_OK, readAll, type Command } from './io.js'

export const spec: CommandSpec<Record<never, never>> = {
  name: 'hash-password',
  usage: '< password',
  description:
    'Reads one password on stdin (so it stays out of the shell history and the process list) and prints its salted scrypt hash for the credentials file. One trailing newline is not part of the password.',
  env: false,
  positionals: 0,
  flags: {},
}

export const run: Command = async (args, io) => {
  parseFlags(spec, args, io.env)
  // `echo secret |` adds a newline that is not part of the password.
  let password: string
  try {
    password = new TextDecoder('utf-8', { fatal: true }).decode(await readAll(io.stdin, Infinity)).replace(/\r?\n$/, '')
  } catch {
    throw new CodedError('EUSAGE', 'the password on stdin is not UTF-8; give it as UTF-8 text')
  }
  if (password.length === 0)
    throw new CodedError(
      'EUSAGE',
      'the password on stdin is empty; pipe it in: printf %s PASSWORD | payments-gate hash-password',
    )
  io.stdout.write(`${await hashPassword(password)}\n`)
  return EXIT_OK
}
