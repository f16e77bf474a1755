// The tests run the TypeScript of lib/ and test/ as it is (node --import=./test/typescript.mjs). Node
// strips the types itself, replacing each with white space, so every line and column stays where it
// was and coverage is measured on the file as written. What Node does not do is find a module whose
// import names the compiled `.js` file, as tsc wants: this hook finds the `.ts` beside it.
import { registerHooks } from 'node:module'

/** A path, relative or absolute, as opposed to a package name; with what follows it (`?query`, `#hash`) apart. */
const PATH = /^((?:\.{1,2}\/|\/|file:)[^?#]*)\.js([?#].*)?$/

registerHooks({
  resolve(specifier, context, next) {
    const match = PATH.exec(specifier)
    // From a TypeScript file, `x.js` names `x.ts` (no `.js` sits beside a `.ts` here): tried first, so that each
    // import of lib/ is one lookup, not a failed one and its error, then the right one.
    if (match !== null && context.parentURL?.endsWith('.ts')) {
      try {
        return next(`${match[1]}.ts${match[2] ?? ''}`, context)
      } catch (error) {
        if (error?.code !== 'ERR_MODULE_NOT_FOUND') throw error
        return next(specifier, context)
      }
    }
    try {
      return next(specifier, context)
    } catch (error) {
      if (error?.code !== 'ERR_MODULE_NOT_FOUND' || match === null) throw error
      return next(`${match[1]}.ts${match[2] ?? ''}`, context)
    }
  },
})
