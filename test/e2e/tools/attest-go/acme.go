// ACME device-attest-01 against a real step-ca, with an ACME client we did
// not write (golang.org/x/crypto/acme), so that step-ca's own verification
// (acme/challenge.go, attestation format "tpm") judges what it is given.
//
//	attest-go acme-device-attest [--x5c AK.crt] DIRECTORY-URL CA-ROOT.pem \
//		IDENTIFIER KEYAUTH-FILE ATTESTATION-FILE -- COMMAND ARGS...
//
// makes an account key (ECDSA P-256), an account, an order for the
// permanent identifier IDENTIFIER, and reads the order's device-attest-01
// challenge; it writes the challenge's key authorization to KEYAUTH-FILE,
// runs COMMAND (e.g. tpmkey attest KEY --acme-key-authorization
// KEYAUTH-FILE -o ATTESTATION-FILE), and answers the challenge with
// {"attObj": base64url(ATTESTATION-FILE)} when that file is a CBOR
// attestation object (sent as it is, byte for byte), else with {fmt,
// attStmt} taken from the attestation object of ATTESTATION-FILE, an
// attestation exchange file. With --x5c, the first certificate of x5c is
// replaced by AK.crt's (a copied AK certificate, for a test of the
// refusal).
//
//	attest-go step-ca-reference DIRECTORY-URL CA-ROOT.pem IDENTIFIER \
//		AK-CA.crt AK-CA.key OUT.crt
//
// does the same for an attestation in the form step-ca accepts, made here
// in software: an RSA 2048 "AK" whose certificate AK-CA issues as
// tpmkey-ca issues AK certificates, a P-256 key's TPMT_PUBLIC (fixedTPM,
// fixedParent, sensitiveDataOrigin, sign), TPM2_Certify's TPMS_ATTEST of it
// with extraData SHA-256(key authorization), signed RSASSA-SHA256 as a
// TPMT_SIGNATURE, alg RS256; then finalizes the order with a CSR that key
// signs and writes the certificate chain to OUT.crt. It shows what a
// tpmkey ACME client must send (docs/attestation.md, "step-ca").
//
// Both print "challenge: STATUS" and, for an invalid one, "error: " and
// step-ca's problem with its subproblems; exit 0 when the challenge is
// valid (and, for step-ca-reference, the certificate written), 1 otherwise.
package main

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/fxamacker/cbor/v2"
	"golang.org/x/crypto/acme"
)

// acmeSession: an account at DIRECTORY-URL, TLS checked against CA-ROOT.pem.
func acmeSession(ctx context.Context, dirURL, rootPath string) (*acme.Client, error) {
	roots, err := pemCertificates(rootPath)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range roots {
		pool.AddCert(c)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	client := &acme.Client{
		Key:          key,
		DirectoryURL: dirURL,
		HTTPClient: &http.Client{
			Timeout:   30 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
		},
	}
	if _, err := client.Register(ctx, &acme.Account{}, acme.AcceptTOS); err != nil {
		return nil, fmt.Errorf("new-account: %w", err)
	}
	return client, nil
}

// deviceAttest orders IDENTIFIER and answers its device-attest-01 challenge
// with the attestation object `answer` makes for the key authorization.
func deviceAttest(ctx context.Context, client *acme.Client, identifier string,
	answer func(keyAuth string) ([]byte, error)) (*acme.Order, error) {
	order, err := client.AuthorizeOrder(ctx, []acme.AuthzID{{Type: "permanent-identifier", Value: identifier}})
	if err != nil {
		return nil, fmt.Errorf("new-order: %w", err)
	}
	if len(order.AuthzURLs) != 1 {
		return nil, fmt.Errorf("new-order: %d authorizations, not 1", len(order.AuthzURLs))
	}
	authz, err := client.GetAuthorization(ctx, order.AuthzURLs[0])
	if err != nil {
		return nil, fmt.Errorf("authorization: %w", err)
	}
	var chal *acme.Challenge
	for _, c := range authz.Challenges {
		if c.Type == "device-attest-01" {
			chal = c
		}
	}
	if chal == nil {
		return nil, errors.New("the authorization offers no device-attest-01 challenge")
	}
	keyAuth, err := client.HTTP01ChallengeResponse(chal.Token) // token "." thumbprint, as for every challenge
	if err != nil {
		return nil, err
	}
	attObj, err := answer(keyAuth)
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(map[string]string{"attObj": base64.RawURLEncoding.EncodeToString(attObj)})
	if err != nil {
		return nil, err
	}
	chal.Payload = payload
	if _, err := client.Accept(ctx, chal); err != nil {
		return nil, fmt.Errorf("challenge: %w", err)
	}
	for {
		c, err := client.GetChallenge(ctx, chal.URI)
		if err != nil {
			return nil, fmt.Errorf("challenge: %w", err)
		}
		switch c.Status {
		case acme.StatusPending, acme.StatusProcessing:
			time.Sleep(200 * time.Millisecond)
			continue
		}
		fmt.Printf("challenge: %s\n", c.Status)
		if c.Status == acme.StatusValid {
			return order, nil
		}
		var problem *acme.Error
		if errors.As(c.Error, &problem) {
			fmt.Printf("error: %s: %s\n", problem.ProblemType, problem.Detail)
			for _, sub := range problem.Subproblems {
				fmt.Printf("error: %s: %s\n", sub.Type, sub.Detail)
			}
		} else if c.Error != nil {
			fmt.Printf("error: %v\n", c.Error)
		}
		return nil, errors.New("step-ca did not accept the attestation")
	}
}

func acmeDeviceAttest(args []string) error {
	var x5cPath string
	if len(args) >= 2 && args[0] == "--x5c" {
		x5cPath, args = args[1], args[2:]
	}
	if len(args) < 7 || args[5] != "--" {
		return errors.New("usage: attest-go acme-device-attest [--x5c AK.crt] DIRECTORY-URL CA-ROOT.pem IDENTIFIER KEYAUTH-FILE ATTESTATION-FILE -- COMMAND ARGS...")
	}
	dirURL, rootPath, identifier, keyAuthPath, attPath, command := args[0], args[1], args[2], args[3], args[4], args[6:]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := acmeSession(ctx, dirURL, rootPath)
	if err != nil {
		return err
	}
	_, err = deviceAttest(ctx, client, identifier, func(keyAuth string) ([]byte, error) {
		if err := os.WriteFile(keyAuthPath, []byte(keyAuth), 0o600); err != nil {
			return nil, err
		}
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("%s: %w", command[0], err)
		}
		object, err := os.ReadFile(attPath)
		if err != nil {
			return nil, err
		}
		var full struct {
			Fmt     string          `cbor:"fmt"`
			AttStmt cbor.RawMessage `cbor:"attStmt"`
		}
		if cbor.Unmarshal(object, &full) != nil {
			// An attestation exchange file: its attestation object, in
			// step-ca's form (fmt and attStmt only, no authData).
			if object, _, err = readAttestation(attPath); err != nil {
				return nil, err
			}
			if err := cbor.Unmarshal(object, &full); err != nil {
				return nil, fmt.Errorf("attestation object: %w", err)
			}
			if object, err = cbor.Marshal(map[string]any{"fmt": full.Fmt, "attStmt": full.AttStmt}); err != nil {
				return nil, err
			}
		}
		if x5cPath == "" {
			return object, nil
		}
		certs, err := pemCertificates(x5cPath)
		if err != nil {
			return nil, err
		}
		var stmt map[string]any
		if err := cbor.Unmarshal(full.AttStmt, &stmt); err != nil {
			return nil, fmt.Errorf("attStmt: %w", err)
		}
		x5c, ok := stmt["x5c"].([]any)
		if !ok || len(x5c) == 0 {
			return nil, errors.New("attStmt: no x5c to replace")
		}
		x5c[0] = certs[0].Raw
		return cbor.Marshal(map[string]any{"fmt": full.Fmt, "attStmt": stmt})
	})
	return err
}

// permanentIdentifiers: the identifierValue of every otherName
// permanentIdentifier (RFC 4043, 1.3.6.1.5.5.7.8.3) in the certificate's
// subjectAltName, read as go.step.sm/crypto's x509util (step-ca) reads
// them: GeneralNames, otherName [0] { OID, [0] EXPLICIT SEQUENCE {
// UTF8String OPTIONAL, OBJECT IDENTIFIER OPTIONAL } }.
func permanentIdentifiers(cert *x509.Certificate) ([]string, error) {
	var ids []string
	for _, ext := range cert.Extensions {
		if !ext.Id.Equal(asn1.ObjectIdentifier{2, 5, 29, 17}) {
			continue
		}
		var names []asn1.RawValue
		if rest, err := asn1.Unmarshal(ext.Value, &names); err != nil || len(rest) != 0 {
			return nil, fmt.Errorf("subjectAltName: %v", err)
		}
		for _, name := range names {
			if name.Class != asn1.ClassContextSpecific || name.Tag != 0 {
				continue
			}
			var other struct {
				TypeID asn1.ObjectIdentifier
				Value  asn1.RawValue
			}
			if _, err := asn1.UnmarshalWithParams(name.FullBytes, &other, "tag:0"); err != nil {
				return nil, fmt.Errorf("otherName: %w", err)
			}
			if !other.TypeID.Equal(asn1.ObjectIdentifier{1, 3, 6, 1, 5, 5, 7, 8, 3}) {
				continue
			}
			var id struct {
				IdentifierValue string                `asn1:"utf8,optional"`
				Assigner        asn1.ObjectIdentifier `asn1:"optional"`
			}
			if _, err := asn1.UnmarshalWithParams(other.Value.FullBytes, &id, "explicit,tag:0"); err != nil {
				return nil, fmt.Errorf("permanentIdentifier: %w", err)
			}
			ids = append(ids, id.IdentifierValue)
		}
	}
	return ids, nil
}

func tpm2b(b []byte) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)
}

// eccPublicArea: the TPMT_PUBLIC of a P-256 signing key as tpmkey-keygen
// makes it (nameAlg SHA-256, fixedTPM|fixedParent|sensitiveDataOrigin|
// userWithAuth|sign, no policy, symmetric and scheme NULL, kdf NULL).
func eccPublicArea(pub *ecdsa.PublicKey) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, 0x0023) // TPM2_ALG_ECC
	b = binary.BigEndian.AppendUint16(b, 0x000B) // SHA-256
	b = binary.BigEndian.AppendUint32(b, 0x00040072)
	b = append(b, tpm2b(nil)...)
	b = binary.BigEndian.AppendUint16(b, 0x0010) // symmetric NULL
	b = binary.BigEndian.AppendUint16(b, 0x0010) // scheme NULL
	b = binary.BigEndian.AppendUint16(b, 0x0003) // NIST P-256
	b = binary.BigEndian.AppendUint16(b, 0x0010) // kdf NULL
	b = append(b, tpm2b(pub.X.FillBytes(make([]byte, 32)))...)
	return append(b, tpm2b(pub.Y.FillBytes(make([]byte, 32)))...)
}

// certifyInfo: TPMS_ATTEST of TPM2_Certify for the key of pubArea.
func certifyInfo(pubArea, extra []byte) []byte {
	digest := sha256.Sum256(pubArea)
	name := append([]byte{0x00, 0x0B}, digest[:]...)
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0xFF544347) // TPM_GENERATED_VALUE
	b = binary.BigEndian.AppendUint16(b, 0x8017)     // TPM_ST_ATTEST_CERTIFY
	b = append(b, tpm2b(append([]byte{0x00, 0x0B}, bytes.Repeat([]byte{0x11}, 32)...))...)
	b = append(b, tpm2b(extra)...)
	b = binary.BigEndian.AppendUint64(b, 1000) // clockInfo
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, 0x2019102300163636) // firmwareVersion
	return append(append(b, tpm2b(name)...), tpm2b(name)...)
}

func readPEMKey(path string) (crypto.Signer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM", path)
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

// akCertificate: what tpmkey-ca issue-ak issues (docs/attestation.md, "The
// AK certificate"), for an RSA key: v3, empty subject, a critical
// subjectAltName of one directoryName with the TPM's manufacturer, model
// and version, EKU 2.23.133.8.3, CA:FALSE.
func akCertificate(pub *rsa.PublicKey, caCert *x509.Certificate, caKey crypto.Signer) ([]byte, error) {
	name, err := asn1.Marshal(pkix.RDNSequence{pkix.RelativeDistinguishedNameSET{
		{Type: asn1.ObjectIdentifier{2, 23, 133, 2, 1}, Value: "id:53575450"},
		{Type: asn1.ObjectIdentifier{2, 23, 133, 2, 2}, Value: "SWTPM"},
		{Type: asn1.ObjectIdentifier{2, 23, 133, 2, 3}, Value: "id:20191023"}}})
	if err != nil {
		return nil, err
	}
	san, err := asn1.Marshal([]asn1.RawValue{{Class: asn1.ClassContextSpecific, Tag: 4, IsCompound: true, Bytes: name}})
	if err != nil {
		return nil, err
	}
	eku, err := asn1.Marshal([]asn1.ObjectIdentifier{{2, 23, 133, 8, 3}})
	if err != nil {
		return nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		BasicConstraintsValid: true,
		ExtraExtensions: []pkix.Extension{{Id: asn1.ObjectIdentifier{2, 5, 29, 17}, Critical: true, Value: san},
			{Id: asn1.ObjectIdentifier{2, 5, 29, 37}, Value: eku}},
	}
	return x509.CreateCertificate(rand.Reader, template, caCert, pub, caKey)
}

func stepCAReference(args []string) error {
	if len(args) != 6 {
		return errors.New("usage: attest-go step-ca-reference DIRECTORY-URL CA-ROOT.pem IDENTIFIER AK-CA.crt AK-CA.key OUT.crt")
	}
	dirURL, rootPath, identifier, caCertPath, caKeyPath, outPath := args[0], args[1], args[2], args[3], args[4], args[5]
	caCerts, err := pemCertificates(caCertPath)
	if err != nil {
		return err
	}
	caKey, err := readPEMKey(caKeyPath)
	if err != nil {
		return err
	}
	ak, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	akCert, err := akCertificate(&ak.PublicKey, caCerts[0], caKey)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := acmeSession(ctx, dirURL, rootPath)
	if err != nil {
		return err
	}
	order, err := deviceAttest(ctx, client, identifier, func(keyAuth string) ([]byte, error) {
		pubArea := eccPublicArea(&key.PublicKey)
		extra := sha256.Sum256([]byte(keyAuth))
		certInfo := certifyInfo(pubArea, extra[:])
		digest := sha256.Sum256(certInfo)
		rsaSig, err := rsa.SignPKCS1v15(rand.Reader, ak, crypto.SHA256, digest[:])
		if err != nil {
			return nil, err
		}
		// TPMT_SIGNATURE: sigAlg RSASSA, hash SHA-256, TPM2B signature.
		sig := append([]byte{0x00, 0x14, 0x00, 0x0B}, tpm2b(rsaSig)...)
		return cbor.Marshal(map[string]any{"fmt": "tpm", "attStmt": map[string]any{
			"ver": "2.0", "alg": -257, "x5c": [][]byte{akCert}, "sig": sig, "certInfo": certInfo, "pubArea": pubArea}})
	})
	if err != nil {
		return err
	}
	csr, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		return err
	}
	if order, err = client.WaitOrder(ctx, order.URI); err != nil {
		return fmt.Errorf("order: %w", err)
	}
	chain, _, err := client.CreateOrderCert(ctx, order.FinalizeURL, csr, true)
	if err != nil {
		return fmt.Errorf("finalize: %w", err)
	}
	var out []byte
	for _, der := range chain {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	if err := os.WriteFile(outPath, out, 0o644); err != nil {
		return err
	}
	fmt.Printf("certificate: %s (%d certificate(s))\n", outPath, len(chain))
	return nil
}
