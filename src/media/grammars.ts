// Which grammar a transformation text is read with is known only once the file is (an image's
// tokens, a video's, a poster's). Places that check a text before that (presets when written,
// signed URLs when made) accept it when any grammar reads it, and otherwise answer the error of
// the grammar it was most likely meant for.
import { AppError } from '../errors.ts';
import { parseTransform } from './transform/parse.ts';
import { asksForPoster, parsePosterTokens } from './video/poster-tokens.ts';
import { namesVideoTokens, parseVideoTokens } from './video/tokens.ts';

/** Throws the 400 of the grammar `text` was meant for, when none reads it. */
export function checkAnyGrammar(text: string): void {
  try {
    parseTransform(text);
  } catch (imageError) {
    try {
      if (asksForPoster(text)) parsePosterTokens(text);
      else parseVideoTokens(text);
    } catch (videoError) {
      // An image token's mistake reads best in the image parser's words, unless the text names
      // tokens only videos have.
      throw namesVideoTokens(text) && videoError instanceof AppError ? videoError : imageError;
    }
  }
}
