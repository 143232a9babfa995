#include "gcp/jwt.h"

#include <memory>
#include <stdexcept>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "util/base64.h"

namespace falcon::gcp {
namespace {

struct BioDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct PkeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};

std::unique_ptr<EVP_PKEY, PkeyDeleter> load_private_key(std::string_view pem) {
  std::unique_ptr<BIO, BioDeleter> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) throw std::runtime_error("OpenSSL could not allocate a buffer");
  std::unique_ptr<EVP_PKEY, PkeyDeleter> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key) throw std::invalid_argument("private_key is not a PEM private key");
  if (EVP_PKEY_base_id(key.get()) != EVP_PKEY_RSA) {
    throw std::invalid_argument("private_key is not an RSA key (RS256 needs one)");
  }
  return key;
}

}  // namespace

void check_rsa_private_key(std::string_view pem) { load_private_key(pem); }

std::string sign_rs256(std::string_view pem_private_key, std::string_view data) {
  const auto key = load_private_key(pem_private_key);
  std::unique_ptr<EVP_MD_CTX, MdCtxDeleter> ctx(EVP_MD_CTX_new());
  std::size_t length = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key.get()) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &length,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    ERR_clear_error();
    throw std::runtime_error("OpenSSL could not start an RS256 signature");
  }
  std::string signature(length, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length,
                     reinterpret_cast<const unsigned char*>(data.data()), data.size()) != 1) {
    ERR_clear_error();
    throw std::runtime_error("OpenSSL could not compute an RS256 signature");
  }
  signature.resize(length);
  return signature;
}

std::string make_signed_jwt(std::string_view header_json, std::string_view payload_json,
                            std::string_view pem_private_key) {
  std::string signing_input =
      base64_encode(header_json, Base64::kUrl) + "." + base64_encode(payload_json, Base64::kUrl);
  const std::string signature = sign_rs256(pem_private_key, signing_input);
  return signing_input + "." + base64_encode(signature, Base64::kUrl);
}

}  // namespace falcon::gcp
