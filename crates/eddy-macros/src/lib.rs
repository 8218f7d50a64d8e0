//! `#[eddy::main]` and `#[eddy::test]`: run an `async fn` on an eddy runtime.
//!
//! Use them through the `eddy` crate, which re-exports them; the expansion names `::eddy`.
//! Misuse is a compile error with a message that says what to change: a function that is
//! not `async`, a `main` with parameters, an unknown or malformed argument.

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{quote, quote_spanned};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Expr, ExprLit, ItemFn, Lit, MetaNameValue, Token};

/// Settings shared by both attributes.
struct Args {
    workers: Option<proc_macro2::TokenStream>,
}

fn parse_args(attr: TokenStream) -> syn::Result<Args> {
    let parser = Punctuated::<MetaNameValue, Token![,]>::parse_terminated;
    let pairs = parser.parse(attr)?;
    let mut args = Args { workers: None };
    for pair in pairs {
        let name = pair
            .path
            .get_ident()
            .map(|i| i.to_string())
            .unwrap_or_default();
        match name.as_str() {
            "workers" => {
                let Expr::Lit(ExprLit {
                    lit: Lit::Int(n), ..
                }) = &pair.value
                else {
                    return Err(syn::Error::new(
                        pair.value.span(),
                        "`workers` takes an integer literal, for example `workers = 4`",
                    ));
                };
                if n.base10_parse::<usize>()? == 0 {
                    return Err(syn::Error::new(n.span(), "`workers` must be at least 1"));
                }
                args.workers = Some(quote!(#n));
            }
            _ => {
                return Err(syn::Error::new(
                    pair.path.span(),
                    format!("unknown argument `{name}`: the only argument is `workers = N`"),
                ))
            }
        }
    }
    Ok(args)
}

fn require_async(f: &ItemFn, attr: &str) -> syn::Result<()> {
    if f.sig.asyncness.is_none() {
        return Err(syn::Error::new(
            f.sig.fn_token.span(),
            format!("the `async` keyword is missing from the function declaration (#[eddy::{attr}] runs an `async fn`)"),
        ));
    }
    Ok(())
}

fn builder(args: &Args) -> proc_macro2::TokenStream {
    match &args.workers {
        Some(n) => quote!(::eddy::Builder::new().workers(#n)),
        None => quote!(::eddy::Builder::new()),
    }
}

/// Runs an `async fn main` on an eddy runtime with [`eddy::run`]'s shutdown: leftover tasks
/// are cancelled, Ctrl-C cancels `main` (the process then exits with status 130).
///
/// `#[eddy::main(workers = 4)]` sets the number of workers (default: one per CPU).
///
/// ```ignore
/// #[eddy::main]
/// async fn main() {
///     println!("{}", eddy::spawn(async { 6 * 7 }).await.unwrap());
/// }
/// ```
#[proc_macro_attribute]
pub fn main(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, item.clone(), "main").unwrap_or_else(|e| with_fallback(e, item))
}

/// Runs an `async fn` test on its own eddy runtime (two workers unless `workers = N`).
///
/// ```ignore
/// #[eddy::test]
/// async fn spawns() {
///     assert_eq!(eddy::spawn(async { 1 }).await.unwrap(), 1);
/// }
/// ```
#[proc_macro_attribute]
pub fn test(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, item.clone(), "test").unwrap_or_else(|e| with_fallback(e, item))
}

/// The error, plus a plain (non-async) version of the function with an empty body, so that
/// the user sees only our message and not follow-up errors ("`main` function not found").
fn with_fallback(error: syn::Error, item: TokenStream) -> TokenStream {
    let error = error.to_compile_error();
    let Ok(mut f) = syn::parse::<ItemFn>(item) else {
        return error.into();
    };
    f.sig.asyncness = None;
    if f.sig.ident == "main" {
        f.sig.inputs.clear();
    }
    let (attrs, vis, sig) = (&f.attrs, &f.vis, &f.sig);
    quote! {
        #error
        #(#attrs)*
        #[allow(unused_variables, unreachable_code)]
        #vis #sig { ::core::panic!("this function did not compile") }
    }
    .into()
}

fn expand(attr: TokenStream, item: TokenStream, kind: &str) -> syn::Result<TokenStream> {
    let args = parse_args(attr)?;
    let mut f: ItemFn = syn::parse(item)?;
    require_async(&f, kind)?;
    if kind == "main" && !f.sig.inputs.is_empty() {
        return Err(syn::Error::new(
            f.sig.inputs.span(),
            "`main` takes no parameters",
        ));
    }
    f.sig.asyncness = None;
    let body = &f.block;
    let attrs = &f.attrs;
    let vis = &f.vis;
    let sig = &f.sig;
    let span = Span::call_site();
    let builder = if kind == "test" && args.workers.is_none() {
        quote!(::eddy::Builder::new().workers(2))
    } else {
        builder(&args)
    };
    let run = if kind == "main" {
        quote_spanned! {span=>
            let runtime = #builder.build().expect("failed to start the eddy runtime");
            match runtime.run(async move #body) {
                ::core::result::Result::Ok(out) => out,
                ::core::result::Result::Err(err) => {
                    ::std::eprintln!("{}", err);
                    ::std::process::exit(130)
                }
            }
        }
    } else {
        quote_spanned! {span=>
            let runtime = #builder.build().expect("failed to start the eddy runtime");
            runtime.block_on(async move #body)
        }
    };
    let test_attr = if kind == "test" {
        quote!(#[::core::prelude::v1::test])
    } else {
        quote!()
    };
    Ok(quote! {
        #test_attr
        #(#attrs)*
        #vis #sig {
            #run
        }
    }
    .into())
}
