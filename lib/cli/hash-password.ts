import { hashPassword } from '../credentials.js'
import { EXIT_OK, UsageError, readAll, type Command } from './io.js'

export const usage = 'payments-gate hash-password < password'

/**
 * Reads one password on stdin (so it stays out of the shell's history and the
 * process list) and prints its hash for the credentials file.
 */
export const run: Command = async (args, io) => {
  if (args.length > 0) throw new UsageError(`takes no arguments, the password comes on stdin (usage: ${usage})`)
  // `echo secret |` adds a newline that is not part of the password.
  let password: string
  try {
    password = new TextDecoder('utf-8', { fatal: true }).decode(await readAll(io.stdin)).replace(/\r?\n$/, '')
  } catch {
    throw new UsageError('the password on stdin is not UTF-8')
  }
  if (password.length === 0) throw new UsageError(`the password on stdin is empty (usage: ${usage})`)
  io.stdout.write(`${await hashPassword(password)}\n`)
  return EXIT_OK
}
