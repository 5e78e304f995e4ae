import type { ImagePart } from "../../engines/engine.ts";
import { AppError } from "../../errors/app-error.ts";

const dataUrl = /^data:(image\/(?:png|jpeg|jpg));base64,([A-Za-z0-9+/\s]*={0,2})$/;
const pngMagic = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const jpegMagic = [0xff, 0xd8, 0xff];

function startsWith(bytes: Uint8Array, magic: number[]): boolean {
  return bytes.length >= magic.length && magic.every((b, i) => bytes[i] === b);
}

/**
 * Decodes an `image_url` part (§2.2): only base64 data URLs of PNG or JPEG images are accepted, and the bytes
 * must really be that format (checked by magic number). `param` names the part, e.g. `messages[0].content[1]`;
 * errors point at its URL, `urlParam` (chat's `.image_url.url`; the Responses API's `.image_url`).
 */
export function decodeImagePart(url: string, param: string, urlParam = `${param}.image_url.url`): ImagePart {
  const at = urlParam;
  if (!url.startsWith("data:")) {
    throw new AppError("invalid_parameter", {
      param: at,
      message: "Image URLs must be base64 data URLs (data:image/png;base64,... or data:image/jpeg;base64,...); remote URLs are not fetched.",
    });
  }
  const match = dataUrl.exec(url);
  if (!match) {
    throw new AppError("invalid_parameter", {
      param: at,
      message: "The image must be a base64 data URL of type image/png or image/jpeg.",
    });
  }
  const mime = match[1] === "image/png" ? "image/png" : "image/jpeg";
  const data = new Uint8Array(Buffer.from(match[2].replace(/\s/g, ""), "base64"));
  const valid = mime === "image/png" ? startsWith(data, pngMagic) : startsWith(data, jpegMagic);
  if (!valid) {
    throw new AppError("invalid_parameter", {
      param: at,
      message: `The data URL does not hold a valid ${mime === "image/png" ? "PNG" : "JPEG"} image.`,
    });
  }
  return { type: "image", data, mime, param, urlParam };
}
